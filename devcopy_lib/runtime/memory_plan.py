"""Memory planning with devices (docs/semantics.md §7): one arena per (device type, index), planned independently,
CPU first.

Inside a device, tensors whose lifetimes (closed instruction intervals) do not overlap may share bytes: a greedy
by size, first-fit offset search. Buffer 0 is reserved for constants, as in ExecuTorch; a buffer never mixes devices.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from ..devices.device import CPU, Device
from .program import JumpFalseCall, Program, TensorValue

DEFAULT_ALIGNMENT = 64
CONSTANT_BUFFER = 0


@dataclass(frozen=True)
class Request:
    """One tensor to place: its key, device, size and lifetime (first and last instruction, inclusive)."""

    key: Hashable
    device: Device
    nbytes: int
    lifetime: tuple[int, int]


@dataclass(frozen=True)
class Allocation:
    buffer: int
    offset: int


@dataclass(frozen=True)
class Buffer:
    device: Device
    nbytes: int


@dataclass(frozen=True)
class MemoryPlan:
    """Buffers (index 0: constants) and where each planned key lives."""

    buffers: tuple[Buffer, ...]
    allocations: dict[Hashable, Allocation]
    requests: tuple[Request, ...] = ()

    def arena_sizes(self) -> dict[str, int]:
        """Planned bytes per device, `{"cpu": n, "cuda:0": m}` (the constants buffer excluded); devcopy plans one
        buffer a device, a plan read from ExecuTorch's program may hold several."""
        sizes: dict[str, int] = {}
        for buffer in self.buffers[CONSTANT_BUFFER + 1 :]:
            sizes[str(buffer.device)] = sizes.get(str(buffer.device), 0) + buffer.nbytes
        return sizes


def _aligned(nbytes: int, alignment: int) -> int:
    return -(-nbytes // alignment) * alignment


class _Lifetimes:
    """Placed allocations indexed by lifetime, so that finding those a new lifetime overlaps costs O(log n + k), not
    a scan of everything placed: the overlapping ones are those live at its first instruction plus those that start
    inside it, each a walk over O(log n) nodes of a segment tree over instructions. An allocation is kept as one int,
    offset << end_bits | end offset (end_bits holds any end offset), which sorts as the (offset, end) pair does, and
    faster."""

    def __init__(self, end: int, end_bits: int) -> None:
        self._leaves = 1 << max(end, 1).bit_length()
        self._end_bits = end_bits
        # per tree node: the packed allocations whose lifetime covers the node's span (and not its parent's), and
        # those whose first instruction falls in the node's span
        self._cover: defaultdict[int, list[int]] = defaultdict(list)
        self._begins: defaultdict[int, list[int]] = defaultdict(list)

    def _span_nodes(self, first: int, last: int) -> list[int]:
        """The O(log n) tree nodes whose spans tile the instructions first..last."""
        nodes = []
        low, high = first + self._leaves, last + self._leaves + 1
        while low < high:
            if low & 1:
                nodes.append(low)
                low += 1
            if high & 1:
                high -= 1
                nodes.append(high)
            low, high = low >> 1, high >> 1
        return nodes

    def add(self, lifetime: tuple[int, int], offset: int, end: int) -> None:
        packed = offset << self._end_bits | end
        for node in self._span_nodes(*lifetime):
            self._cover[node].append(packed)
        node = lifetime[0] + self._leaves
        while node:
            self._begins[node].append(packed)
            node >>= 1

    def first_fit(self, lifetime: tuple[int, int], size: int) -> int:
        """The lowest offset where `size` bytes clear every placed allocation whose lifetime overlaps `lifetime`."""
        shift = self._end_bits
        mask = (1 << shift) - 1
        offset = 0
        for packed in self._busy(lifetime):
            if offset + size <= packed >> shift:
                break
            end = packed & mask
            if end > offset:
                offset = end
        return offset

    def _busy(self, lifetime: tuple[int, int]) -> list[int]:
        """Every placed allocation whose lifetime overlaps `lifetime`, packed, sorted by (offset, end offset)."""
        first, last = lifetime
        found: list[int] = []
        node = first + self._leaves
        while node:
            found.extend(self._cover.get(node, ()))
            node >>= 1
        if first < last:
            for node in self._span_nodes(first + 1, last):
                found.extend(self._begins.get(node, ()))
        found.sort()
        return found


def _plan_device(requests: list[Request], alignment: int) -> tuple[int, dict[Hashable, int]]:
    """Greedy by size: largest first, each at the lowest offset clear of every placed, lifetime-overlapping one."""
    offsets: dict[Hashable, int] = {}
    most = sum(_aligned(r.nbytes, alignment) for r in requests)  # no end offset exceeds every size stacked
    placed = _Lifetimes(max(r.lifetime[1] for r in requests), most.bit_length())  # a device has a request
    total = 0
    for request in sorted(requests, key=lambda r: (-r.nbytes, r.lifetime)):
        size = _aligned(request.nbytes, alignment)
        offset = placed.first_fit(request.lifetime, size)
        if size:
            placed.add(request.lifetime, offset, offset + size)
        offsets[request.key] = offset
        total = max(total, offset + size)
    return total, offsets


def plan(requests: Iterable[Request], alignment: int = DEFAULT_ALIGNMENT) -> MemoryPlan:
    """Plan `requests`: group by device (CPU first, then by type and index), one buffer per device."""
    requests = tuple(requests)
    by_device: dict[Device, list[Request]] = defaultdict(list)
    for request in requests:
        if request.nbytes < 0 or request.lifetime[0] > request.lifetime[1]:
            raise ValueError(f"Bad planning request {request}: nbytes must be >= 0 and lifetime (first, last) ordered")
        by_device[request.device].append(request)
    buffers = [Buffer(CPU, 0)]
    allocations: dict[Hashable, Allocation] = {}
    for device in sorted(by_device, key=lambda d: (not d.is_cpu, int(d.type), d.index)):
        total, offsets = _plan_device(by_device[device], alignment)
        buffers.append(Buffer(device, total))
        allocations.update({key: Allocation(len(buffers) - 1, off) for key, off in offsets.items()})
    return MemoryPlan(tuple(buffers), allocations, requests)


def lifetimes(program: Program) -> dict[int, tuple[int, int]]:
    """First and last instruction touching each tensor value; inputs are live from the start, outputs to the end.
    A value touched inside a loop (the instructions from a backward jump's destination to the jump) lives through
    the whole loop: the next iteration reads what an earlier one wrote, so nothing else may take its bytes there."""
    spans: dict[int, list[int]] = {}
    end = len(program.instructions)
    for position, instruction in enumerate(program.instructions):
        for index in program.tensor_indices(instruction):
            span = spans.setdefault(index, [position, position])
            span[1] = position
    for index in program.inputs:
        spans.setdefault(index, [0, 0])[0] = 0
    for index in program.outputs:
        spans.setdefault(index, [end, end])[1] = end
    loops = [
        (ins.destination, position)
        for position, ins in enumerate(program.instructions)
        if isinstance(ins, JumpFalseCall) and ins.destination <= position
    ]
    changed = bool(loops)
    while changed:  # nested loops: a span widened by an inner loop may now reach an outer one
        changed = False
        for span in spans.values():
            for start, stop in loops:
                if span[0] <= stop and span[1] >= start and (span[0] > start or span[1] < stop):
                    span[0], span[1] = min(span[0], start), max(span[1], stop)
                    changed = True
    return {index: (first, last) for index, (first, last) in spans.items()}


def plan_program(program: Program, alignment: int = DEFAULT_ALIGNMENT) -> MemoryPlan:
    """Plan every planned, non-constant tensor of `program` (at its upper-bound size) and store the plan on it; a
    planned mutable buffer (a resident one) is live for the whole program, so no other tensor ever shares its bytes."""
    spans = lifetimes(program)
    whole = (0, len(program.instructions))
    for index, value in enumerate(program.values):
        if isinstance(value, TensorValue) and value.planned and value.mutable:
            spans[index] = whole
    requests = [
        Request(index, value.spec.device, value.spec.nbytes, span)
        for index, span in sorted(spans.items())
        if isinstance(value := program.values[index], TensorValue)
        and value.planned
        and (not value.is_constant or value.mutable)
    ]
    memory_plan = plan(requests, alignment)
    program.memory_plan = memory_plan
    return memory_plan
