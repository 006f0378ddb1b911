"""The operator registry: kernels keyed by (operator name, kernel key), as in ExecuTorch's runtime.

The key is ExecuTorch's dtype/dim-order string (`kernel_key(...)`, e.g. `v1/6;0,1|6;0,1`) or "" for a fallback
kernel (`arg_meta: null`). Lookup tries the exact key, then the fallback. Registering an existing (name, key) is
refused ("Re-registering ..."), also when two linked libs hold the same pair. Libs are linked lazily: a lib lists its
(name, key) pairs cheaply and builds a kernel only when one is looked up (ATen's native lib has thousands).

Kernel calling convention (boxed; what a method executes):
    `kernel(ctx, args) -> out`
- `ctx`: a `KernelRuntimeContext`. Portable kernels record failures on it (`ctx.fail(Error.X, message)`) and return
  the out unchanged; ATen-mode kernels ignore it and raise.
- `args`: a list of the op's arguments in schema order: positional, then keyword-only, then the `out` argument(s)
  last (`kernel.schema.arguments.flat_all`). Values are `PortableTensor` (portable mode) or `torch.Tensor` (ATen
  mode), Python scalars, `torch.dtype`, lists/tuples (int[], Tensor[]) or None.
- The kernel writes into the out tensor(s) and returns the out (a tuple for several outs).
`kernel.schema` is the torchgen `FunctionSchema`, so an emitter can order arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torchgen.model import FunctionSchema

from ..names import FALLBACK_KEY, MODES, ErrorKind
from ..tensors.error import Error

BoxedKernel = Callable[[Any, list[Any]], Any]  # (ctx, args) -> out; ATen-mode kernels ignore ctx

# ExecuTorch's ScalarType codes, used in kernel keys.
SCALAR_TYPE_CODES = {
    torch.uint8: 0,
    torch.int8: 1,
    torch.int16: 2,
    torch.int32: 3,
    torch.int64: 4,
    torch.float16: 5,
    torch.float32: 6,
    torch.float64: 7,
    torch.complex64: 9,
    torch.complex128: 10,
    torch.bool: 11,
    torch.bfloat16: 15,
}


def kernel_key(tensors: Iterable[tuple[torch.dtype, Sequence[int]]]) -> str:
    """ExecuTorch's kernel key for tensor arguments given as (dtype, dim_order) pairs: `v1/6;0,1|6;0,1`."""
    parts = [f"{SCALAR_TYPE_CODES[dtype]};{','.join(str(d) for d in dim_order)}" for dtype, dim_order in tensors]
    return "v1/" + "|".join(parts)


class RegistrationError(ValueError):
    """A (name, key) registered twice; ExecuTorch's Error::RegistrationAlreadyRegistered."""

    kind = ErrorKind.REGISTRATION
    error = Error.RegistrationAlreadyRegistered


@dataclass(frozen=True)
class Kernel:
    """A resolved kernel: call it as `kernel(ctx, args)` (see the module docstring)."""

    name: str
    key: str
    fn: BoxedKernel = field(repr=False, compare=False)
    schema: FunctionSchema = field(repr=False, compare=False)
    lib: str
    mode: str
    kernel_name: str
    source: str

    def __call__(self, ctx: Any, args: list[Any]) -> Any:
        return self.fn(ctx, args)


class KernelLib:
    """A named set of kernels of one mode, built lazily.

    `entries()` returns {(name, key): kernel_name} (cheap); `make(name, kernel_name, schema) -> BoxedKernel` and
    `schema_of(name) -> FunctionSchema` build a kernel the first time it is looked up."""

    def __init__(
        self,
        name: str,
        mode: str,
        source: str,
        entries: Callable[[], dict[tuple[str, str], str]],
        schema_of: Callable[[str], FunctionSchema],
        make: Callable[[str, str, FunctionSchema], BoxedKernel],
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"lib mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.name, self.mode, self.source = name, mode, source
        self._entries, self._schema_of, self._make = entries, schema_of, make

    @functools.cached_property
    def entries(self) -> dict[tuple[str, str], str]:
        return self._entries()

    @functools.cached_property
    def ops(self) -> list[str]:
        return sorted({name for name, _ in self.entries})

    def kernel(self, name: str, key: str = FALLBACK_KEY) -> Kernel:
        return self._kernel(name, key)

    @functools.cache  # noqa: B019 - libs are long-lived and cached themselves
    def _kernel(self, name: str, key: str) -> Kernel:
        kernel_name = self.entries[(name, key)]
        schema = self._schema_of(name)
        return Kernel(
            name, key, self._make(name, kernel_name, schema), schema, self.name, self.mode, kernel_name, self.source
        )

    def __repr__(self) -> str:
        return f"KernelLib({self.name!r}, mode={self.mode}, {len(self.entries)} kernels from {self.source})"


class OperatorRegistry:
    """Kernels of one mode from one or more linked libs, plus single registrations; (name, key) is unique."""

    def __init__(self, libs: Iterable[KernelLib] = ()) -> None:
        self.libs: list[KernelLib] = []
        self._index: dict[tuple[str, str], KernelLib | Kernel] = {}
        for lib in libs:
            self.link(lib)

    @property
    def mode(self) -> str | None:
        return self.libs[0].mode if self.libs else None

    def _owner_name(self, pair: tuple[str, str]) -> str:
        owner = self._index[pair]
        return f"lib {owner.name!r}" if isinstance(owner, KernelLib) else f"a kernel of lib {owner.lib!r}"

    def _refuse(self, pair: tuple[str, str], newcomer: str) -> RegistrationError:
        name, key = pair
        return RegistrationError(
            f"Re-registering {name} (kernel key {key!r}{' = fallback' if key == FALLBACK_KEY else ''}): "
            f"{self._owner_name(pair)} already registers it and {newcomer} registers it again. "
            "Each (operator, kernel key) may be registered once: link only one lib that holds it."
        )

    def link(self, lib: KernelLib) -> None:
        """Add every kernel of `lib`; refused as a whole if any (name, key) is already registered."""
        if self.mode is not None and lib.mode != self.mode:
            raise ValueError(
                f"cannot link {lib.mode}-mode lib {lib.name!r} into a {self.mode}-mode registry "
                f"({', '.join(linked.name for linked in self.libs)}); a runtime links libs of one mode"
            )
        for pair in lib.entries:
            if pair in self._index:
                raise self._refuse(pair, f"lib {lib.name!r}")
        self.libs.append(lib)
        self._index.update(dict.fromkeys(lib.entries, lib))

    def register(self, kernel: Kernel) -> None:
        pair = (kernel.name, kernel.key)
        if pair in self._index:
            raise self._refuse(pair, f"a kernel of lib {kernel.lib!r}")
        self._index[pair] = kernel

    def lookup(self, name: str, key: str = FALLBACK_KEY) -> Kernel | None:
        """The kernel for `name` with the exact `key`, else its fallback kernel, else None."""
        for pair in ((name, key), (name, FALLBACK_KEY)):
            owner = self._index.get(pair)
            if owner is not None:
                return owner.kernel(*pair) if isinstance(owner, KernelLib) else owner
        return None

    def ops(self) -> list[str]:
        return sorted({name for name, _ in self._index})

    def keys(self, name: str) -> list[str]:
        return sorted(key for n, key in self._index if n == name)
