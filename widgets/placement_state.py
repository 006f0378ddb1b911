"""State of the placement explorer: settings in, a lowered and placed program out. No display calls."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, models, overload_name, place_devices
from devcopy_lib import reference as executorch_reference
from devcopy_lib.bench.cost_model import default_model

__all__ = ["PlacementState"]


@dataclass
class PlacementState:
    """The explorer's settings; `lowered()` and `placed()` compute (and cache) what they describe."""

    model: str = "add"
    delegate_ops: tuple[str, ...] | None = None  # None: DEFAULT_DELEGATE_OPS
    target_device: str = "cuda:0"
    partition: str = "capability"
    strategy: str = "executorch"
    skip_h2d_for_method_inputs: bool = False
    skip_d2h_for_method_outputs: bool = False
    # prices each copy in the report: the model measured on the H200, or anything with predict(direction, nbytes)
    cost_model: Any = field(default_factory=default_model, repr=False)
    factories: dict[str, Callable[[], tuple]] = field(default_factory=lambda: dict(models.MODELS))
    _cache: dict[tuple, Any] = field(default_factory=dict, repr=False)

    def add_model(self, name: str, module, example_inputs) -> None:
        """Offer your own module (with example inputs) under `name`, and select it."""
        inputs = tuple(example_inputs)
        self.factories[name] = lambda: (module, inputs)
        self._cache.clear()  # a name given again means a new module
        self.model = name
        self.delegate_ops = None

    @property
    def model_names(self) -> list[str]:
        return list(self.factories)

    def _cached(self, key: tuple, compute: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def module_and_inputs(self) -> tuple:
        if self.model not in self.factories:
            raise ValueError(f"Unknown model {self.model!r}. Valid: {', '.join(self.factories)}. "
                             f"To use your own, call add_model(name, module, example_inputs).")
        return self._cached(("model", self.model), self.factories[self.model])

    def model_ops(self) -> tuple[str, ...]:
        """The ATen overloads in the model's decomposed graph, in graph order (what can be ticked for delegation)."""
        def ops():
            lowered = export_and_lower(*self.module_and_inputs(), delegate_ops=(), target_device=None)
            graph = lowered.exported_program.graph_module.graph
            return tuple(dict.fromkeys(overload_name(n.target) for n in graph.nodes if overload_name(n.target)))
        return self._cached(("ops", self.model), ops)

    def ticked_ops(self) -> tuple[str, ...]:
        """The model's ops that will be delegated: the chosen ones, or those in DEFAULT_DELEGATE_OPS."""
        chosen = DEFAULT_DELEGATE_OPS if self.delegate_ops is None else self.delegate_ops
        return tuple(op for op in self.model_ops() if op in chosen)

    def lowered(self):
        """`export_and_lower` of the selected model with the ticked ops on the target device."""
        key = ("lowered", self.model, self.ticked_ops(), self.target_device, self.partition)
        return self._cached(key, lambda: export_and_lower(
            *self.module_and_inputs(), delegate_ops=self.ticked_ops(), target_device=self.target_device,
            partition=self.partition))

    def placed(self):
        """`place_devices` of `lowered()` with this state's strategy, skip switches and cost model."""
        return place_devices(self.lowered(), strategy=self.strategy,
                             skip_h2d_for_method_inputs=self.skip_h2d_for_method_inputs,
                             skip_d2h_for_method_outputs=self.skip_d2h_for_method_outputs,
                             cost_model=self.cost_model)

    def executorch_counts(self) -> dict:
        """ExecuTorch 1.5.1's own {delegates, h2d, d2h, order} for the same model, ops, partition and switches."""
        if not executorch_reference.available():
            raise RuntimeError("ExecuTorch is not installed, so its own counts cannot be shown. To fix: "
                               "pip install -c constraints.txt -e '.[reference]' (executorch==1.5.1).")
        options = (self.target_device, self.partition, self.skip_h2d_for_method_inputs,
                   self.skip_d2h_for_method_outputs)
        return self._cached(("executorch", self.model, self.ticked_ops(), *options), lambda: (
            executorch_reference.executorch_counts(*self.module_and_inputs(), self.ticked_ops(), *options)))
