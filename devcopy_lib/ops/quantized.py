"""The `quantized_decomposed` out variants in `torch.library`: what a PT2E-quantized program's quantize, dequantize
and choose_qparams ops become when emitted (`quantize_per_tensor.out`, ...), with the schemas of ExecuTorch's
kernels/quantized/quantized.yaml (`ops/quantized.yaml`).

torch defines the functional ops (`torch.ao.quantization.fx._decomposed`); their out variants come from ExecuTorch's
quantized AOT lib (`import executorch.kernels.quantized` loads `libquantized_ops_aot_lib`), whose C++ definitions
abort the process if the same overload was defined before (a duplicate `def()` in a static initializer). So, as for
the et_copy ops (`ops/aot.py`): out variants already defined are reused; with ExecuTorch installed its AOT lib is
loaded, so that its later import finds them defined; only without it does devcopy define them itself, in a FRAGMENT,
computing each through its functional op and copying into `out` (the meaning at trace time and in eager calls).
The quantized embeddings are the exception: ExecuTorch defines them in Python, not in its AOT lib, and devcopy leaves
them to it (ops/quantized_embedding.py says why); their kernels compute without any torch op. So does the quantized
add's (ops/quantized_add.py): torch has no functional add to compute through. Import this module for
its side effect; the runtime's kernels are `kernels/quantized.py`'s, whoever defined the schemas.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

import torch
from torchgen.model import FunctionSchema, SchemaKind

from . import quantized_add, quantized_embedding
from .aot import EXECUTORCH_PACKAGE
from .schema import QUANTIZED_YAML, OpEntry, load_ops_yaml, parse_schema

NAMESPACE = "quantized_decomposed"
EXECUTORCH_QUANTIZED = f"{EXECUTORCH_PACKAGE}.kernels.quantized"  # names: the package's import name

_own_library = None  # kept alive: dropping a torch.library.Library unregisters its definitions


def entries() -> tuple[OpEntry, ...]:
    """The out variants devcopy implements, from ops/quantized.yaml."""
    return load_ops_yaml(QUANTIZED_YAML)


def defined_by_executorch_python(name: str) -> bool:
    """Whether ExecuTorch defines out variant `name` in Python (the quantized embeddings), not in its AOT lib: devcopy
    defines none of those in torch."""
    return name.partition("::")[2].partition(".")[0] in quantized_embedding.BITS


def _overload(name: str) -> torch._ops.OpOverload | None:
    """`quantized_decomposed::dequantize_per_tensor.out` as a torch overload, or None when not defined."""
    namespace, _, op = name.partition("::")
    base, _, overload = op.partition(".")
    try:
        found = getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")
    except (AttributeError, RuntimeError):
        return None
    return found if isinstance(found, torch._ops.OpOverload) else None


def _functional_ops() -> None:
    """torch's functional quantized_decomposed ops (the ones a converted PT2E graph calls)."""
    importlib.import_module("torch.ao.quantization.fx._decomposed")


@functools.cache
def functional_of(name: str) -> torch._ops.OpOverload:
    """The functional overload an out variant computes: `dequantize_per_tensor.Tensor_out` -> `.tensor`, matched by
    torchgen's signature (out arguments stripped), as the emitter pairs them the other way."""
    _functional_ops()
    entry = next(e for e in entries() if e.name == name)
    wanted = entry.schema.signature()
    packet = getattr(getattr(torch.ops, NAMESPACE), name.partition("::")[2].partition(".")[0])
    for overload in packet.overloads():
        candidate = getattr(packet, overload)
        schema = FunctionSchema.parse(str(candidate._schema))
        if schema.kind() is SchemaKind.functional and schema.signature() == wanted:
            found: torch._ops.OpOverload = candidate
            return found
    raise LookupError(f"{name}: torch defines no functional {packet} overload with its arguments")


def out_names(name: str) -> tuple[str, ...]:
    """The names of `name`'s out arguments, in schema order (`scale_out`, `zero_point_out`)."""
    return tuple(a.name for a in parse_schema(next(e.func for e in entries() if e.name == name)).arguments.out)


def computes_into_out(name: str) -> Callable[..., Any]:
    """`name`'s meaning as a call `(*args, **kwargs)` with its outs passed by name: the functional op's result
    copied into each out (resized to the result's sizes first when they differ, as an ATen out kernel does). The
    same arithmetic as the quantized model run eagerly, so outputs equal eager exactly. A quantized embedding:
    ops/quantized_embedding.py's meaning, which needs no torch op; the quantized add: ops/quantized_add.py's."""
    if defined_by_executorch_python(name):
        return quantized_embedding.meaning(name)
    if name.partition("::")[2].partition(".")[0] == "add":  # torch has no functional add to compute through
        return quantized_add.meaning(name)
    functional, outs = functional_of(name), out_names(name)

    def call(*args: Any, **kwargs: Any) -> Any:
        targets = [kwargs.pop(out) for out in outs]
        results = functional(*args, **kwargs)
        results = results if isinstance(results, (tuple, list)) else (results,)
        for target, result in zip(targets, results, strict=True):
            if target.shape != result.shape:
                target.resize_(result.shape)
            target.copy_(result)
        return targets[0] if len(targets) == 1 else tuple(targets)

    return call


def _missing() -> list[OpEntry]:
    return [
        entry for entry in entries() if _overload(entry.name) is None and not defined_by_executorch_python(entry.name)
    ]


def _define_own(missing: list[OpEntry]) -> None:
    """devcopy's definitions of the `missing` out variants, with ExecuTorch's schemas (no ExecuTorch installed)."""
    global _own_library
    _own_library = torch.library.Library(NAMESPACE, "FRAGMENT")  # type: ignore[no-untyped-call]  # unannotated
    for entry in missing:
        _own_library.define(entry.func)  # type: ignore[no-untyped-call]  # the schema without its namespace
        op = entry.name.partition("::")[2]
        _own_library.impl(op, computes_into_out(entry.name), "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]


def ensure_defined() -> str:
    """Make sure every out variant of ops/quantized.yaml exists in torch; returns who defined them: 'existing',
    'executorch' (its AOT lib, loaded here) or 'devcopy'."""
    _functional_ops()
    if not _missing():
        return "existing"
    spec = importlib.util.find_spec(EXECUTORCH_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        importlib.import_module(EXECUTORCH_QUANTIZED)  # loads its AOT lib; a failed load only logs
        if not _missing():
            return EXECUTORCH_PACKAGE
    _define_own(_missing())
    return "devcopy"


DEFINED_BY = ensure_defined()
