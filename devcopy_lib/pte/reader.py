"""ExecuTorch's own programs read into devcopy: `open_pte` turns a `.pte` (a path, its bytes, or an
`ExecutorchProgramManager`) into a `PteProgram` - its operator table, instructions, values, memory plan, inputs,
outputs, constants and delegates. It only reads: which operators a runtime resolves is `registration.py`'s.

The bytes are parsed by ExecuTorch's own `deserialize_pte_binary` (`exir/_serialize/_program.py`) against its own
schema (`exir/schema.py`); devcopy reads nothing of the flatbuffer itself. What devcopy adds is validation: every
index an instruction, value or delegate holds is checked against the table it points into, and any failure - a
truncated or corrupted file, a wrong magic, a missing path, an unknown plan - is a `PteLoadError` (kind `load`) or a
`PteUsageError` (kind `usage`) naming what was wrong and the fix; nothing is returned half-read. A delegate of a
backend devcopy cannot run still opens: its blob and backend id are kept as they are.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..devices.device import CPU, Device, DeviceType
from ..names import COPY_OP_BY_NAME, ErrorKind
from ..runtime.failures import LoadError
from ..tensors.error import Error
from .executorch_import import import_executorch

PTE_MAGIC = b"ET12"  # ExecuTorch 1.5.1's file_identifier (exir/_serialize/program.fbs), bytes 4..8 of a .pte
MAX_PTE_BYTES = 1 << 31  # a larger file is refused before it is read (a .pte is a flatbuffer, < 2 GiB)


class PteLoadError(LoadError):
    """A `.pte` could not be read: missing, unreadable, not an ExecuTorch program, or inconsistent. `error` is
    ExecuTorch's code (NotFound, InvalidProgram, ...); `problem` the one-line cause, the message adds the fix."""

    def __init__(self, error: Error, problem: str, fix: str) -> None:
        super().__init__(error, f"{problem}. To fix: {fix}")
        self.problem = problem


class PteUsageError(ValueError):
    """`open_pte` was called wrongly: an unknown plan name, or a source that is no path, bytes or program."""

    kind = ErrorKind.USAGE


@dataclass(frozen=True)
class PteTensor:
    """A tensor value: dtype, sizes, dim order and dynamism as serialized; `mem_id`/`offset`: its planned place
    (`non_const_buffer_sizes[mem_id]`, None when unplanned, e.g. a constant); `device`: from its
    extra_tensor_info (CPU when absent); `constant`: its index into the program's constant buffer (0: none)."""

    dtype: torch.dtype
    sizes: tuple[int, ...]
    dim_order: tuple[int, ...]
    dynamism: str
    mem_id: int | None
    offset: int | None
    device: Device
    constant: int

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.sizes:
            count *= size
        return count * self.dtype.itemsize


@dataclass(frozen=True)
class PteScalar:
    """A non-tensor value: int, float, bool, str or None."""

    value: int | float | bool | str | None


@dataclass(frozen=True)
class PteList:
    """A list value: `kind` is ExecuTorch's (IntList, BoolList, DoubleList, TensorList, OptionalTensorList);
    `items` the values (IntList, BoolList, DoubleList) or value indices (tensor lists; -1: an absent optional) -
    for IntList ExecuTorch stores value indices too, as `items_are_values` says."""

    kind: str
    items: tuple[Any, ...]

    @property
    def items_are_values(self) -> bool:
        return self.kind in ("BoolList", "DoubleList")


PteValue = PteTensor | PteScalar | PteList


@dataclass(frozen=True)
class PteKernel:
    """Call operator `op` (an index into the operator table) on value indices `args` (outs last)."""

    op: int
    args: tuple[int, ...]
    kind: str = "kernel"


@dataclass(frozen=True)
class PteDelegate:
    """Call delegate `delegate` (an index into `PteProgram.delegates`) on value indices `args` (outputs last)."""

    delegate: int
    args: tuple[int, ...]
    kind: str = "delegate"


@dataclass(frozen=True)
class PteMove:
    """Copy value `source` into value `target` (ExecuTorch's MoveCall)."""

    source: int
    target: int
    kind: str = "move"


@dataclass(frozen=True)
class PteJumpFalse:
    """Jump to instruction `destination` when the bool value `cond` is false (ExecuTorch's JumpFalseCall)."""

    cond: int
    destination: int
    kind: str = "jump"


@dataclass(frozen=True)
class PteFree:
    """Release value `value`'s memory (ExecuTorch's FreeCall)."""

    value: int
    kind: str = "free"


PteInstruction = PteKernel | PteDelegate | PteMove | PteJumpFalse | PteFree


@dataclass(frozen=True)
class PteBackendDelegate:
    """A delegate: its backend id (the backend's class name), compile specs (key -> bytes), `device` from the
    `target_device` spec (None: no spec, it runs on the CPU) and `blob`, the backend's processed bytes."""

    backend_id: str
    compile_specs: dict[str, bytes]
    device: Device | None
    blob: bytes = field(repr=False)


@dataclass(frozen=True)
class PteProgram:
    """One execution plan of a `.pte`, as devcopy reads it. `operators` are spelled `ns::name.overload` like
    devcopy's; `instructions` are those of the plan's chains, in order; `buffer_sizes` is ExecuTorch's
    `non_const_buffer_sizes` (buffer 0 is reserved) and `buffer_devices` maps a buffer index to its device
    (ExecuTorch's `non_const_buffer_device`; an absent buffer is on the CPU)."""

    plan: str
    plans: tuple[str, ...]
    operators: list[str]
    instructions: list[PteInstruction]
    values: list[PteValue]
    inputs: list[int]
    outputs: list[int]
    buffer_sizes: list[int]
    buffer_devices: dict[int, Device]
    delegates: list[PteBackendDelegate]
    constants: list[bytes] = field(repr=False)
    size: int = 0

    def tensor(self, index: int) -> PteTensor:
        value = self.values[index]
        if not isinstance(value, PteTensor):
            raise TypeError(f"value {index} is a {type(value).__name__}, not a tensor")
        return value

    def instruction_name(self, position: int) -> str:
        """What instruction `position` runs: `aten::sin.out`, `delegate_0`, or its kind (`move`, `jump`, `free`)."""
        ins = self.instructions[position]
        if isinstance(ins, PteKernel):
            return self.operators[ins.op]
        if isinstance(ins, PteDelegate):
            return f"delegate_{ins.delegate}"
        return ins.kind

    def uses(self, position: int) -> list[int]:
        """The tensor values instruction `position` reads or writes (tensor-list items included), first use first."""
        ins = self.instructions[position]
        if isinstance(ins, (PteKernel, PteDelegate)):
            args: tuple[int, ...] = ins.args
        elif isinstance(ins, PteMove):
            args = (ins.source, ins.target)
        else:
            args = (ins.value,) if isinstance(ins, PteFree) else (ins.cond,)
        return self.tensors_of(args)

    def tensors_of(self, args: Sequence[int]) -> list[int]:
        """The tensor values among `args` (value indices), the items of tensor lists included, first seen first."""
        found: list[int] = []
        for index in args:
            value = self.values[index]
            if isinstance(value, PteTensor):
                found.append(index)
            elif isinstance(value, PteList) and value.kind in ("TensorList", "OptionalTensorList"):
                found.extend(i for i in value.items if i != -1)
        return list(dict.fromkeys(found))

    def copies(self) -> dict[str, tuple[int, int]]:
        """Per direction (`h2d`, `d2h`, `d2d`): how many et_copy kernel calls the plan makes and the bytes they move
        (the out tensor's, the call's last argument) - per run, as devcopy's PlacementReport counts them."""
        counts = {op.direction.value: (0, 0) for op in COPY_OP_BY_NAME.values()}
        for ins in self.instructions:
            if not isinstance(ins, PteKernel):
                continue
            copy = COPY_OP_BY_NAME.get(self.operators[ins.op])
            if copy is not None:
                calls, nbytes = counts[copy.direction.value]
                out = self.values[ins.args[-1]]
                counts[copy.direction.value] = (calls + 1, nbytes + (out.nbytes if isinstance(out, PteTensor) else 0))
        return counts

    def to_dict(self) -> dict[str, Any]:
        """The program as JSON-ready data (what `devcopy place PATH.pte --json` prints under `program`): its table,
        instructions, memory plan per buffer and device, inputs, outputs and delegates (blobs by size)."""

        def instruction(i: int, ins: PteInstruction) -> dict[str, Any]:
            row: dict[str, Any] = {"index": i, "kind": ins.kind}
            if isinstance(ins, PteKernel):
                row.update(name=self.operators[ins.op], args=list(ins.args))
            elif isinstance(ins, PteDelegate):
                row.update(name=f"delegate_{ins.delegate}", args=list(ins.args))
            else:
                row.update(args=[v for k, v in vars(ins).items() if k != "kind"])
            return row

        return {
            "plan": self.plan,
            "plans": list(self.plans),
            "bytes": self.size,
            "operators": list(self.operators),
            "instructions": [instruction(i, ins) for i, ins in enumerate(self.instructions)],
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "buffers": [
                {"index": i, "bytes": size, "device": str(self.buffer_devices.get(i, CPU))}
                for i, size in enumerate(self.buffer_sizes)
            ],
            "delegates": [
                {
                    "name": f"delegate_{i}",
                    "backend_id": d.backend_id,
                    "device": str(d.device or CPU),
                    "blob_bytes": len(d.blob),
                }
                for i, d in enumerate(self.delegates)
            ],
        }

    def __str__(self) -> str:
        lines = [
            f"PteProgram {self.plan!r}: {len(self.values)} values, operators {self.operators}, inputs {self.inputs}, "
            f"outputs {self.outputs}, buffers {self.buffer_sizes} "
            f"({', '.join(f'{i}: {d}' for i, d in sorted(self.buffer_devices.items())) or 'all on cpu'})"
        ]
        for i, ins in enumerate(self.instructions):
            if isinstance(ins, PteKernel):
                lines.append(f"  {i}: {self.operators[ins.op]}{list(ins.args)}")
            elif isinstance(ins, PteDelegate):
                lines.append(f"  {i}: delegate {self.delegates[ins.delegate].backend_id}{list(ins.args)}")
            else:
                lines.append(f"  {i}: {ins}")
        return "\n".join(lines)


def _bytes_of(source: Any) -> bytes:
    """The `.pte` bytes of a path, bytes-like object or ExecutorchProgramManager."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.exists(path):
            raise PteLoadError(Error.NotFound, f"no such .pte file: {path!r}", "pass the path of an existing .pte")
        if os.path.isdir(path):
            raise PteLoadError(
                Error.NotFound, f"{path!r} is a directory, not a .pte file", "pass the path of the .pte inside it"
            )
        try:
            size = os.path.getsize(path)
            if size > MAX_PTE_BYTES:
                raise PteLoadError(
                    Error.InvalidProgram, f"{path!r} has {size} bytes, more than a .pte can", "pass a .pte file"
                )
            with open(path, "rb") as handle:
                return handle.read()
        except OSError as exc:
            raise PteLoadError(
                Error.AccessFailed, f"cannot read {path!r}: {exc.strerror or exc}", "check its permissions"
            ) from exc
    buffer = getattr(source, "buffer", None)
    if isinstance(buffer, (bytes, bytearray, memoryview)):  # ExecutorchProgramManager
        return bytes(buffer)
    raise PteUsageError(
        f"open_pte takes a .pte path, its bytes or an ExecutorchProgramManager, not a {type(source).__name__}"
    )


def _check_magic(data: bytes) -> None:
    if len(data) < 8:
        raise PteLoadError(
            Error.InvalidProgram,
            f"not an ExecuTorch program: {len(data)} bytes, shorter than a .pte header (8)",
            "pass a complete .pte file (it may be truncated)",
        )
    if data[4:8] != PTE_MAGIC:
        raise PteLoadError(
            Error.InvalidProgram,
            f"not an ExecuTorch 1.5.1 program: file identifier {data[4:8]!r}, expected {PTE_MAGIC!r}",
            "pass a .pte written by ExecuTorch's to_executorch() (e.g. devcopy's executorch_pte) of this version",
        )


def _deserialize(data: bytes) -> Any:
    """ExecuTorch's own parse of the bytes; whatever it raises on a damaged file becomes a PteLoadError."""
    import_executorch()
    from executorch.exir._serialize._program import deserialize_pte_binary

    try:
        return deserialize_pte_binary(data).program
    except Exception as exc:  # a damaged flatbuffer makes the generated reader raise anything
        raise PteLoadError(
            Error.InvalidProgram,
            f"ExecuTorch cannot parse the program ({len(data)} bytes): {type(exc).__name__}: {exc}",
            "the file is truncated or corrupted; write it again with to_executorch()",
        ) from exc


def _invalid(what: str) -> PteLoadError:
    return PteLoadError(
        Error.InvalidProgram,
        f"inconsistent program: {what}",
        "the file is corrupted or not written by ExecuTorch; write it again with to_executorch()",
    )


def _index(value: Any, size: int, what: str, allow_negative_one: bool = False) -> int:
    """`value` as an index below `size`, else the inconsistency named by `what`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise _invalid(f"{what} is {value!r}, not an integer")
    if allow_negative_one and value == -1:
        return value
    if not 0 <= value < size:
        raise _invalid(f"{what} is {value}, outside 0..{size - 1}")
    return value


def _device(device_type: Any, index: Any, what: str) -> Device:
    try:
        return Device(DeviceType(int(device_type)), int(index))
    except (ValueError, TypeError) as exc:
        raise _invalid(f"{what}: device type {device_type!r} index {index!r}: {exc}") from exc


def _tensor(t: Any, where: str, n_buffers: int, n_constants: int) -> PteTensor:
    import_executorch()
    from executorch.exir.tensor import get_scalar_type

    try:
        dtype = get_scalar_type(t.scalar_type)
    except Exception as exc:
        raise _invalid(f"{where} has scalar type {t.scalar_type!r}, which has no torch dtype") from exc
    sizes = tuple(int(s) for s in t.sizes)
    if any(s < 0 for s in sizes):
        raise _invalid(f"{where} has negative sizes {list(sizes)}")
    info = t.extra_tensor_info
    device = CPU if info is None else _device(info.device_type, info.device_index, f"{where}'s device")
    alloc = t.allocation_info
    mem_id = offset = None
    if alloc is not None:
        mem_id = _index(alloc.memory_id, n_buffers, f"{where}'s memory_id")
        offset = int(alloc.memory_offset_low) | (int(alloc.memory_offset_high) << 32)
    constant = _index(t.data_buffer_idx, max(n_constants, 1), f"{where}'s data_buffer_idx")
    return PteTensor(
        dtype=dtype,
        sizes=sizes,
        dim_order=tuple(int(d) for d in t.dim_order),
        dynamism=getattr(t.shape_dynamism, "name", str(t.shape_dynamism)),
        mem_id=mem_id,
        offset=offset,
        device=device,
        constant=constant,
    )


def _value(evalue: Any, where: str, n_values: int, n_buffers: int, n_constants: int) -> PteValue:
    import_executorch()
    from executorch.exir import schema

    val = evalue.val
    if isinstance(val, schema.Tensor):
        return _tensor(val, where, n_buffers, n_constants)
    if isinstance(val, schema.Null):
        return PteScalar(None)
    if isinstance(val, schema.Int):
        return PteScalar(int(val.int_val))
    if isinstance(val, schema.Bool):
        return PteScalar(bool(val.bool_val))
    if isinstance(val, schema.Double):
        return PteScalar(float(val.double_val))
    if isinstance(val, schema.String):
        return PteScalar(str(val.string_val))
    if isinstance(val, (schema.BoolList, schema.DoubleList)):
        return PteList(type(val).__name__, tuple(val.items))
    if isinstance(val, (schema.IntList, schema.TensorList, schema.OptionalTensorList)):
        optional = isinstance(val, schema.OptionalTensorList)
        items = tuple(
            _index(i, n_values, f"{where}'s item {k}", allow_negative_one=optional) for k, i in enumerate(val.items)
        )
        return PteList(type(val).__name__, items)
    raise _invalid(f"{where} is a {type(val).__name__}, which ExecuTorch's schema does not define")


def _instruction(ins: Any, where: str, n_ops: int, n_values: int, n_delegates: int, n_ins: int) -> PteInstruction:
    import_executorch()
    from executorch.exir import schema

    args = ins.instr_args

    def value(i: Any, what: str) -> int:
        return _index(i, n_values, f"{where}'s {what}")

    if isinstance(args, schema.KernelCall):
        return PteKernel(
            _index(args.op_index, n_ops, f"{where}'s operator"),
            tuple(value(a, f"arg {k}") for k, a in enumerate(args.args)),
        )
    if isinstance(args, schema.DelegateCall):
        return PteDelegate(
            _index(args.delegate_index, n_delegates, f"{where}'s delegate"),
            tuple(value(a, f"arg {k}") for k, a in enumerate(args.args)),
        )
    if isinstance(args, schema.MoveCall):
        return PteMove(value(args.move_from, "move_from"), value(args.move_to, "move_to"))
    if isinstance(args, schema.JumpFalseCall):
        return PteJumpFalse(
            value(args.cond_value_index, "condition"),
            _index(args.destination_instruction, n_ins + 1, f"{where}'s destination"),
        )
    if isinstance(args, schema.FreeCall):
        return PteFree(value(args.value_index, "value"))
    raise _invalid(f"{where} is a {type(args).__name__}, which ExecuTorch's schema does not define")


def _delegate(d: Any, where: str, inline: Sequence[Any]) -> PteBackendDelegate:
    import_executorch()
    from executorch.exir import schema
    from executorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY

    if d.processed.location != schema.DataLocation.INLINE:
        raise _invalid(f"{where}'s data is in segment {d.processed.index}, which ExecuTorch did not restore")
    blob = inline[_index(d.processed.index, len(inline), f"{where}'s data index")].data
    specs = {str(s.key): bytes(s.value) for s in d.compile_specs}
    device = None
    if TARGET_DEVICE_COMPILE_SPEC_KEY in specs:
        text = specs[TARGET_DEVICE_COMPILE_SPEC_KEY].decode("utf-8", errors="replace")
        try:
            device = Device.parse(text)
        except ValueError as exc:
            raise _invalid(f"{where}'s target_device {text!r}: {exc}") from exc
    return PteBackendDelegate(str(d.id), specs, device, bytes(blob))


def _program(raw: Any, plan_name: str | None, size: int) -> PteProgram:
    plans = tuple(str(p.name) for p in raw.execution_plan)
    if not plans:
        raise _invalid("it has no execution plan")
    name = plans[0] if plan_name is None else plan_name
    if name not in plans:
        raise PteUsageError(f"the program has no plan {name!r}. Its plans: {', '.join(plans)}; pass one of them")
    plan = raw.execution_plan[plans.index(name)]
    if len(plan.chains) == 0:
        raise _invalid(f"plan {name!r} has no chain")
    buffer_sizes = [int(s) for s in plan.non_const_buffer_sizes]
    n_values, n_buffers, n_constants = len(plan.values), len(buffer_sizes), len(raw.constant_buffer)
    values = [_value(v, f"value {i}", n_values, n_buffers, n_constants) for i, v in enumerate(plan.values)]
    buffer_devices: dict[int, Device] = {}
    for k, entry in enumerate(plan.non_const_buffer_device or []):
        buffer = _index(entry.buffer_idx, n_buffers, f"non_const_buffer_device[{k}]'s buffer")
        buffer_devices[buffer] = _device(entry.device_type, entry.device_index, f"non_const_buffer_device[{k}]")
    for i, v in enumerate(values):
        if isinstance(v, PteTensor) and v.mem_id is not None and v.offset is not None:
            if v.offset + v.nbytes > buffer_sizes[v.mem_id]:
                raise _invalid(
                    f"value {i} ({v.nbytes} bytes at offset {v.offset}) overflows buffer {v.mem_id} "
                    f"of {buffer_sizes[v.mem_id]} bytes"
                )
            buffer_device = buffer_devices.get(v.mem_id, CPU)
            if v.device != buffer_device:
                raise _invalid(f"value {i} is on {v.device}, but planned in buffer {v.mem_id} on {buffer_device}")
    # A constant's bytes run to the next constant's start: ExecuTorch pads each to 16 bytes when it writes the
    # segment (`_extract_constant_segment`) and keeps the padding when it reads it (`_restore_constant_segment`),
    # so only a constant shorter than its sizes need is inconsistent.
    constants = [bytes(b.storage) for b in raw.constant_buffer]
    for i, v in enumerate(values):
        if isinstance(v, PteTensor) and v.constant and constants[v.constant] and len(constants[v.constant]) < v.nbytes:
            raise _invalid(
                f"value {i}'s constant {v.constant} holds {len(constants[v.constant])} bytes, its "
                f"{v.dtype} {list(v.sizes)} needs {v.nbytes}"
            )
    delegates = [_delegate(d, f"delegate {i}", raw.backend_delegate_data) for i, d in enumerate(plan.delegates)]
    operators = [f"{op.name}.{op.overload}" if op.overload else str(op.name) for op in plan.operators]
    raw_instructions = [ins for chain in plan.chains for ins in chain.instructions]
    n_ins = len(raw_instructions)
    instructions = [
        _instruction(ins, f"instruction {i}", len(operators), n_values, len(delegates), n_ins)
        for i, ins in enumerate(raw_instructions)
    ]
    return PteProgram(
        plan=name,
        plans=plans,
        operators=operators,
        instructions=instructions,
        values=values,
        inputs=[_index(i, n_values, f"input {k}") for k, i in enumerate(plan.inputs)],
        outputs=[_index(i, n_values, f"output {k}") for k, i in enumerate(plan.outputs)],
        buffer_sizes=buffer_sizes,
        buffer_devices=buffer_devices,
        delegates=delegates,
        constants=constants,
        size=size,
    )


def open_pte(source: Any, plan: str | None = None) -> PteProgram:
    """Read plan `plan` (None: the first, `forward` for an exported module) of an ExecuTorch program: `source` is a
    `.pte` path, its bytes, or an `ExecutorchProgramManager`. Raises PteLoadError (kind `load`) for a file that is
    missing, a directory, truncated, corrupted or inconsistent, PteUsageError (kind `usage`) for an unknown plan or
    source type; returns only a program whose every index was checked."""
    data = _bytes_of(source)
    _check_magic(data)
    raw = _deserialize(data)
    try:
        return _program(raw, plan, len(data))
    except (PteLoadError, PteUsageError):
        raise
    except Exception as exc:  # a field a damaged file left of the wrong type
        raise _invalid(f"{type(exc).__name__}: {exc}") from exc


__all__ = [
    "PTE_MAGIC",
    "PteBackendDelegate",
    "PteDelegate",
    "PteFree",
    "PteJumpFalse",
    "PteKernel",
    "PteList",
    "PteLoadError",
    "PteMove",
    "PteProgram",
    "PteScalar",
    "PteTensor",
    "PteUsageError",
    "open_pte",
]
