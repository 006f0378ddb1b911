"""The `peer` strategy's two questions: may device A copy straight to device B (`peer_rule`), and what does each
cross-device value cost both ways (`CrossDevicePair`: direct peer copy vs D2H + H2D through host memory)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..devices import Device, DeviceType, get_device_allocator
from ..names import Direction
from .pricing import CostModel, predict_seconds

PeerAccess = bool | Callable[[Device, Device], bool] | Iterable[tuple[Any, Any]] | None


def _as_device(value: Any) -> Device:
    if isinstance(value, Device):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Device(DeviceType.CUDA, value)
    if isinstance(value, str):
        return Device.parse(value)
    raise ValueError(f"peer_access pairs hold devices ('cuda:1', Device, or a CUDA index), got {value!r}")


def _ask_allocator(src: Device, dst: Device) -> bool:
    """The registered allocator of the devices' type decides; with none registered, assume peer access."""
    allocator = get_device_allocator(src.type)
    if allocator is None:
        return True
    try:
        return allocator.can_access_peer(src.index, dst.index)
    except ValueError:  # an index the backend does not see: no direct path to promise
        return False


def peer_rule(peer_access: PeerAccess = None) -> Callable[[Device, Device], bool]:
    """`peer_access` as a predicate `(src, dst) -> bool`: None asks the registered allocator (no allocator: yes); a
    bool answers for every pair; a callable is used as is; pairs `{("cuda:0", "cuda:1")}` grant both directions."""
    rule: Callable[[Device, Device], bool]
    if peer_access is None:
        rule = _ask_allocator
    elif isinstance(peer_access, bool):
        answer = peer_access
        return lambda src, dst: answer and src.type == dst.type
    elif callable(peer_access):
        rule = peer_access
    else:
        try:
            pairs = {(_as_device(a), _as_device(b)) for a, b in peer_access}
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"peer_access must be None, a bool, a callable (src, dst) -> bool, or pairs of devices "
                f"like {{('cuda:0', 'cuda:1')}}; got {peer_access!r} ({exc})"
            ) from None
        pairs |= {(b, a) for a, b in pairs}
        rule = lambda src, dst: (src, dst) in pairs  # noqa: E731
    return lambda src, dst: src.type == dst.type and bool(rule(src, dst))


@dataclass
class CrossDevicePair:
    """One value going from device `src` to device `dst`: the host hop the ExecuTorch placement gives it (a D2H, then
    an H2D) and the direct copy `peer` replaces it with when the devices have peer access. `d2h_shared`: the D2H also
    serves other readers, so a direct copy saves only the H2D."""

    value: str
    src: str
    dst: str
    bytes: int
    peer_access: bool
    chosen: str  # "direct" or "host_hop"
    d2h_shared: bool

    def to_dict(self, cost_model: CostModel | None = None) -> dict[str, Any]:
        """Both options (copies, bytes over PCIe, predicted seconds with a cost model) and what direct saves."""
        hop_copies = 1 if self.d2h_shared else 2
        hop_s = _hop_seconds(cost_model, self.bytes, self.d2h_shared)
        direct_s = predict_seconds(cost_model, Direction.D2D, self.bytes)
        host_hop = {"copies": hop_copies, "host_bytes": hop_copies * self.bytes, "predicted_s": hop_s}
        direct = {"copies": 1, "host_bytes": 0, "predicted_s": direct_s}
        saved_s = None if hop_s is None or direct_s is None else hop_s - direct_s
        return {
            "value": self.value,
            "src": self.src,
            "dst": self.dst,
            "bytes": self.bytes,
            "peer_access": self.peer_access,
            "chosen": self.chosen,
            "d2h_shared": self.d2h_shared,
            "host_hop": host_hop,
            "direct": direct,
            "direct_saves": {"copies": hop_copies - 1, "host_bytes": host_hop["host_bytes"], "predicted_s": saved_s},
        }


def _hop_seconds(cost_model: CostModel | None, nbytes: int, d2h_shared: bool) -> float | None:
    h2d = predict_seconds(cost_model, Direction.H2D, nbytes)
    d2h = 0.0 if d2h_shared else predict_seconds(cost_model, Direction.D2H, nbytes)
    return None if h2d is None or d2h is None else h2d + d2h
