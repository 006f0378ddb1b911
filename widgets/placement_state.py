"""State of the placement explorer: settings in, a lowered and placed program out. No display calls.

The expensive step, `torch.export` + decompositions, runs once per model and input set; lowering is cached per
(delegated ops, target, partition) and placement per strategy and switches, so a control only redoes what it changed.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_program, lower, models, overload_name, place_devices
from devcopy_lib import reference as executorch_reference
from devcopy_lib.bench.cost_model import copy_pricer
from devcopy_lib.names import STRATEGIES, Partition, Strategy

__all__ = ["PlacementState", "parse_target", "target_devices"]

T = TypeVar("T")

KEPT_RESULTS = 32  # lowered and placed programs kept per state (least recently used dropped first)
SWITCHES = ("skip_h2d_for_method_inputs", "skip_d2h_for_method_outputs")  # what placed_if can turn on


def parse_target(text: str) -> str | dict[str, str]:
    """The target box's text: one device (`cuda:0`) for every delegate, or `key=device` pairs separated by commas
    (`delegate_0=cuda:0, delegate_1=cuda:1`; a key is a delegate name or an op overload such as `add.Tensor`)."""
    text = text.strip()
    if "=" not in text:
        return text
    mapping = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, device = (s.strip() for s in part.partition("="))
        if not (sep and key and device):
            raise ValueError(
                f"Bad target entry {part!r} in {text!r}: write one device (cuda:0) or key=device "
                "pairs such as delegate_0=cuda:0, delegate_1=cuda:1"
            )
        mapping[key] = device
    return mapping


def target_devices(target: Any) -> set[str]:
    """The distinct devices a target (one device, a mapping, or None) names."""
    if target is None:
        return set()
    if isinstance(target, dict):
        return {str(device) for device in target.values()}
    return {str(target)}


@dataclass
class PlacementState:
    """The explorer's settings; `exported()`, `lowered()` and `placed()` compute (and cache) what they describe."""

    model: str = "add"
    delegate_ops: tuple[str, ...] | None = None  # None: DEFAULT_DELEGATE_OPS
    target_device: Any = "cuda:0"  # one device, or {delegate name or op overload: device}
    partition: str = Partition.CAPABILITY
    strategy: str = Strategy.EXECUTORCH
    skip_h2d_for_method_inputs: bool = False
    skip_d2h_for_method_outputs: bool = False
    hoist_constants: bool = False  # constant-derived CPU values and their H2D copies run once at load
    resident_buffers: bool = False  # mutable buffers (a KV cache) live on the device, updated there
    # prices each copy in the report: the H200 model for the selected backend's host memory (the pricer every
    # surface uses, bench.cost_model.copy_pricer), or anything with predict(direction, nbytes)
    cost_model: Any = field(default_factory=copy_pricer, repr=False)
    # the samples, then the real models (these need the `models` extra: without it, choosing one says how to install)
    factories: dict[str, Callable[[], tuple[Any, ...]]] = field(
        default_factory=lambda: {**models.MODELS, **models.REAL_MODELS}
    )
    # per model: module, exported program, ops
    _cache: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False)
    _results: OrderedDict[Any, Any] = field(default_factory=OrderedDict, repr=False)  # lowered / placed programs, LRU

    def add_model(self, name: str, module: Any, example_inputs: Any) -> None:
        """Offer your own module (with example inputs: a tuple, or one bare tensor) under `name`, and select it."""
        inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
        self.factories[name] = lambda: (module, inputs)
        self._forget(name)  # a name given again means a new module
        self.model = name
        self.delegate_ops = None

    def _forget(self, name: str) -> None:
        for store in (self._cache, self._results):
            for key in [k for k in store if k[1] == name]:
                del store[key]

    @property
    def model_names(self) -> list[str]:
        return list(self.factories)

    def _cached(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        if key not in self._cache:
            self._cache[key] = compute()
        value: T = self._cache[key]
        return value

    def _kept(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """Like `_cached`, but only the KEPT_RESULTS most recently used results stay."""
        if key in self._results:
            self._results.move_to_end(key)
        else:
            self._results[key] = compute()
            while len(self._results) > KEPT_RESULTS:
                self._results.popitem(last=False)
        return self._results[key]

    def module_and_inputs(self) -> tuple[Any, ...]:
        if self.model not in self.factories:
            raise ValueError(
                f"Unknown model {self.model!r}. Valid: {', '.join(self.factories)}. "
                f"To use your own, call add_model(name, module, example_inputs)."
            )
        return self._cached(("model", self.model), self.factories[self.model])

    def exported(self) -> Any:
        """The selected model exported and decomposed: computed once per model, whatever the other settings."""
        return self._cached(("exported", self.model), lambda: export_program(*self.module_and_inputs()))

    def model_ops(self) -> tuple[str, ...]:
        """The ATen overloads in the model's decomposed graph, in graph order (what can be ticked for delegation)."""

        def ops() -> tuple[str, ...]:
            graph = self.exported().graph_module.graph
            return tuple(dict.fromkeys(name for n in graph.nodes if (name := overload_name(n.target))))

        return self._cached(("ops", self.model), ops)

    def ticked_ops(self) -> tuple[str, ...]:
        """The model's ops that will be delegated: the chosen ones, or those in DEFAULT_DELEGATE_OPS."""
        chosen = DEFAULT_DELEGATE_OPS if self.delegate_ops is None else self.delegate_ops
        strays = tuple(op for op in chosen if op not in self.model_ops())
        if strays and self.delegate_ops is not None:  # checked once by `lower`: the model has none of them, so it
            # partitions nothing, and an unknown name (`addmm`) is refused naming the overloads the model uses
            self._cached(("checked", self.model, strays), lambda: lower(self.exported(), strays, None) and strays)
        return tuple(op for op in self.model_ops() if op in chosen)

    def preset_ops(self, preset: str) -> tuple[str, ...]:
        """The model's ops in the delegate set `preset` of `models.DELEGATE_SETS` (what ticking that preset ticks)."""
        if preset not in models.DELEGATE_SETS:
            raise ValueError(f"Unknown delegate set {preset!r}. Valid: {', '.join(models.DELEGATE_SETS)}.")
        return tuple(op for op in self.model_ops() if op in models.DELEGATE_SETS[preset])

    def _target_key(self) -> Any:
        target = self.target_device
        return tuple(sorted(target.items())) if isinstance(target, dict) else target

    def lowered(self) -> Any:
        """`lower` of the exported model with the ticked ops on the target device (no new export)."""
        key = ("lowered", self.model, self.ticked_ops(), self._target_key(), self.partition)
        return self._kept(key, lambda: lower(self.exported(), self.ticked_ops(), self.target_device, self.partition))

    def peer_possible(self) -> bool:
        """The `peer` strategy differs from the others only when delegates sit on two or more devices."""
        return len(target_devices(self.target_device)) >= 2

    def placed_key(self) -> tuple[Any, ...]:
        """What `placed()` depends on: two states with the same key give the same placement (the explorer keys its
        what-if cache on it)."""
        return (
            "placed",
            self.model,
            self.ticked_ops(),
            self._target_key(),
            self.partition,
            self.strategy,
            self.skip_h2d_for_method_inputs,
            self.skip_d2h_for_method_outputs,
            self.hoist_constants,
            self.resident_buffers,
            id(self.cost_model),
        )

    def placed(self) -> Any:
        """`place_devices` of `lowered()` with this state's strategy, skip, hoist and resident-buffer switches and
        cost model."""
        return self._kept(
            self.placed_key(),
            lambda: place_devices(
                self.lowered(),
                strategy=self.strategy,
                skip_h2d_for_method_inputs=self.skip_h2d_for_method_inputs,
                skip_d2h_for_method_outputs=self.skip_d2h_for_method_outputs,
                hoist_constants=self.hoist_constants,
                resident_buffers=self.resident_buffers,
                cost_model=self.cost_model,
            ),
        )

    def placed_if(self, change: Mapping[str, str]) -> Any:
        """What `placed()` would give with one change (the inspector's what-if): `{"delegate": op}` delegates `op`
        too, `{"switch": name}` turns a placement switch on, `{"strategy": name}` places with that strategy. Shares
        this state's caches; the state is unchanged."""
        if "delegate" in change:
            other = dataclasses.replace(self, delegate_ops=(*self.ticked_ops(), change["delegate"]))
        elif change.get("switch") in SWITCHES:
            switch: dict[str, Any] = {change["switch"]: True}
            other = dataclasses.replace(self, **switch)
        elif change.get("strategy") in STRATEGIES:
            other = dataclasses.replace(self, strategy=change["strategy"])
        else:
            raise ValueError(
                f"Unknown what-if {dict(change)!r}: give {{'delegate': op}}, {{'switch': name}} with name one of "
                f"{', '.join(SWITCHES)}, or {{'strategy': name}} with name one of {', '.join(STRATEGIES)}."
            )
        return other.placed()

    def executorch_counts(self) -> dict[str, Any]:
        """ExecuTorch 1.5.1's own {delegates, h2d, d2h, order} for the same model, ops, partition and switches."""
        if not executorch_reference.available():
            raise RuntimeError(
                "ExecuTorch is not installed, so its own counts cannot be shown. To fix: "
                "pip install -c constraints.txt -e '.[reference]' (executorch==1.5.1)."
            )
        options = (
            self.target_device,
            self.partition,
            self.skip_h2d_for_method_inputs,
            self.skip_d2h_for_method_outputs,
        )
        counts: dict[str, Any] = self._cached(
            ("executorch_counts", self.model, self.ticked_ops(), self._target_key(), *options[1:]),
            lambda: executorch_reference.executorch_counts(*self.module_and_inputs(), self.ticked_ops(), *options),
        )
        return counts
