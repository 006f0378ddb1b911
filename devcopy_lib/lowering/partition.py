"""torch.fx's capability partitioning, same decisions, without its quadratic cycle checks.

`propose_partitions` returns exactly the node sets that torch.fx's `CapabilityBasedPartitioner(gm, support,
allows_single_node_partition=...).propose_partitions()` returns: it replays that algorithm step for step (nodes
visited in reverse graph order; a new partition per supported node; at every node each live partition, by its first
visit, tries to merge into the first; a merge is refused when the merged partition would sit on a cycle; getitems
follow their producer; optionally single-compute-node partitions dropped). What changes is the cost of each step:

- reachability is a bitset per node (a Python int over graph positions), built once, instead of a Python set of every
  downstream node: a merge check ORs the bitsets of the pair's outside users and tests them against the pair's nodes
  and against the partitions whose reachability set names either side, where torch.fx walks every downstream node;
- a partition retires once it can never merge again: every supported node still to come, and the oldest partition
  (the one the other partitions try to merge into), reach it through an unsupported node, a path torch.fx's check
  always sees; retired partitions are skipped as merge candidates, their checks would fail and change nothing;
- torch.fx's `partition_map` (the partitions each one reaches, stale entries included) is kept only for the ids a
  check can still ask about (partitions not retired, and the oldest), inverted: id -> partitions whose map holds it;
- a node that is not supported skips the pass over the partitions when the previous pass merged nothing: it would
  repeat it exactly.

On transformer graphs few partitions are live and not retired at any time, so the work is linear in nodes and edges
plus bitset operations of graph-size words (about N * (N + E) / 64 machine words in all).

Only top-level nodes are partitioned, as torch.fx's partitioner (and so ExecuTorch's) does: the branch subgraphs of a
`torch.cond` or `map` are never entered, and the control-flow op itself is no delegate op, so it and its branches stay
on the CPU (docs/semantics.md, "Control flow").
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import fx
from torch.fx.node import _get_qualified_name
from torch.fx.passes.operator_support import OperatorSupportBase

_GETITEM = "_operator.getitem"
_NON_COMPUTE = frozenset({"torch.ops.aten.view", _GETITEM})


def _bits(positions: Iterable[int]) -> int:
    out = 0
    for p in positions:
        out |= 1 << p
    return out


def _positions(bits: int) -> Iterable[int]:
    while bits:
        low = bits & -bits
        yield low.bit_length() - 1
        bits ^= low


class _Partitions:
    """The partitioner's state: node positions are graph order; partition ids count up from 0 as torch.fx's do."""

    def __init__(self, nodes: list[fx.Node], supported: list[bool]):
        pos = {n: i for i, n in enumerate(nodes)}
        self.user_bits = [_bits(pos[u] for u in n.users) for n in nodes]
        self.supported = _bits(i for i, s in enumerate(supported) if s)
        # closure[i]: position i and every node downstream of it
        self.closure = [0] * len(nodes)
        for i in range(len(nodes) - 1, -1, -1):
            bits = 1 << i
            for u in _positions(self.user_bits[i]):
                bits |= self.closure[u]
            self.closure[i] = bits
        # barred[i]: the nodes with a path to i through a node no partition holds (an unsupported one); a partition
        # and one such node's can never merge: torch.fx's check sees that path
        ancestors, self.barred = [0] * len(nodes), [0] * len(nodes)
        for i, node in enumerate(nodes):
            ancestors[i], barred = 1 << i, 0
            for arg in node.all_input_nodes:
                a = pos[arg]
                ancestors[i] |= ancestors[a]
                barred |= self.barred[a] | (0 if supported[a] else ancestors[a] ^ (1 << a))
            self.barred[i] = barred
        self.members: dict[int, int] = {}  # partition id -> bitset of node positions (live partitions only)
        self.order: dict[int, int] = {}  # partition id -> id of its first-created part (torch.fx's partitions_order)
        self.users: dict[int, int] = {}  # partition id -> bitset of its users outside it
        self.barred_by: dict[int, int] = {}  # partition id -> nodes with a path to it through an unsupported node
        self.candidates: dict[int, int] = {}  # order -> id, ascending: the partitions that may still merge
        self.oldest = 0  # the id of the partition of order 0, into which a pass without a new partition merges
        # torch.fx's partition_map (id -> ids it reaches, as it last computed them, stale entries included), kept for
        # the ids a merge check can still ask about (candidates and the oldest: `relevant`), inverted: id -> holders
        self.reach_ids: dict[int, int] = {}
        self.holders: dict[int, set[int]] = {}
        self.relevant = 0

    def _reach(self, user_bits: int) -> int:
        """Bitset of the users and every node downstream of them."""
        bits = 0
        for u in _positions(user_bits):
            bits |= self.closure[u]
        return bits

    def _held_in(self, pid: int, reach: int) -> bool:
        """Whether a live partition whose partition_map holds `pid` has a node in `reach`."""
        return any(h in self.members and self.members[h] & reach for h in self.holders[pid])

    def _set_reach_ids(self, pid: int, ids: int) -> None:
        self.reach_ids[pid] = ids = ids & self.relevant
        for target in _positions(ids):
            self.holders[target].add(pid)

    def _downstream_ids(self, user_bits: int, exclude: int) -> int:
        """torch.fx's `downstream_partitions` (the partitions the users reach, directly or through a partition's
        map), less the ids in `exclude`, for the relevant ids."""
        reach, ids = self._reach(user_bits), 0
        for pid in _positions(self.relevant):
            if self.members[pid] & reach or self._held_in(pid, reach):
                ids |= 1 << pid
        return ids & ~exclude

    def create(self, pos: int, pid: int) -> None:
        self.members[pid] = 1 << pos
        self.order[pid] = pid
        self.users[pid] = self.user_bits[pos]
        self.barred_by[pid] = self.barred[pos]
        self.candidates[pid] = pid
        self.relevant |= 1 << pid
        self.holders[pid] = set()
        self._set_reach_ids(pid, self._downstream_ids(self.user_bits[pos], 1 << pid))

    def _barred(self, a: int, b: int) -> bool:
        """Whether a path between partitions a and b passes through an unsupported node: they never merge."""
        return bool(self.barred_by[a] & self.members[b] or self.barred_by[b] & self.members[a])

    def _retire_if_stuck(self, order: int, pid: int, pos: int) -> bool:
        """Retire `pid` if it can no longer merge: every supported node at or above `pos` (the new partitions to
        come) reaches it through an unsupported node, and so does the oldest partition (which others merge into)."""
        if self.supported & ((2 << pos) - 1) & ~self.barred_by[pid]:
            return False
        if pid != self.oldest:
            if not self._barred(pid, self.oldest):
                return False
            self.relevant &= ~(1 << pid)
            del self.holders[pid]
        del self.candidates[order]
        return True

    def maybe_merge(self, self_id: int, other_id: int) -> tuple[int, bool]:
        """torch.fx's `maybe_merge_partition`: merge unless a path leaves the pair and comes back to it."""
        merged = self.members[self_id] | self.members[other_id]
        outside_users = (self.users[self_id] | self.users[other_id]) & ~merged
        reach = self._reach(outside_users)
        if reach & merged or self._held_in(self_id, reach) or self._held_in(other_id, reach):
            return self_id, False
        merge_id, removed_id = self_id, other_id
        if self.members[self_id].bit_count() < self.members[other_id].bit_count():
            merge_id, removed_id = other_id, self_id
        self.members[merge_id] = merged
        del self.members[removed_id]
        kept, dropped = sorted((self.order[merge_id], self.order.pop(removed_id)))
        self.order[merge_id] = kept
        self.candidates[kept] = merge_id
        del self.candidates[dropped]  # a candidate: only the oldest (order 0, kept) can be retired and merge
        if kept == 0:
            self.oldest = merge_id
        self.barred_by[merge_id] |= self.barred_by.pop(removed_id)
        self.users[merge_id] = outside_users
        del self.users[removed_id]
        reach_ids = self.reach_ids[merge_id] | self.reach_ids.pop(removed_id)
        self.relevant &= ~(1 << removed_id)  # a dead id: no check asks about it again
        del self.holders[removed_id]
        both = (1 << merge_id) | (1 << removed_id)
        self._set_reach_ids(merge_id, (reach_ids | self._downstream_ids(outside_users, both)) & ~both)
        return merge_id, True

    def merge_pass(self, pos: int, first: int | None) -> bool:
        """Every live partition, by first visit, tries to merge into `first` (or the oldest); True if any merged.
        Retired partitions are skipped: their checks would fail and change nothing."""
        self_id = self.oldest if first is None else first
        merged_any = False
        for order, other_id in list(self.candidates.items()):
            if other_id == self_id or order not in self.candidates or self._retire_if_stuck(order, other_id, pos):
                continue
            self_id, merged = self.maybe_merge(self_id, other_id)
            merged_any |= merged
        return merged_any


def propose_partitions(
    gm: fx.GraphModule, support: OperatorSupportBase, allows_single_node_partition: bool = True
) -> list[set[fx.Node]]:
    """The node sets `CapabilityBasedPartitioner(gm, support, allows_single_node_partition).propose_partitions()`
    proposes, in its order."""
    nodes = list(gm.graph.nodes)
    submodules = dict(gm.named_modules())
    supported = [support.is_node_supported(submodules, n) for n in nodes]
    state = _Partitions(nodes, supported)
    next_id, dirty = 0, False
    for pos in range(len(nodes) - 1, -1, -1):
        if supported[pos]:
            # the new partition tries every other; they cannot reach its node, so no other pair changes
            state.create(pos, next_id)
            dirty = state.merge_pass(pos, next_id) or dirty
            next_id += 1
        elif dirty:  # a clean state's pass (oldest first) would repeat the last one, which merged nothing
            dirty = state.merge_pass(pos, None)
    groups = {pid: {nodes[p] for p in _positions(bits)} for pid, bits in state.members.items()}
    assignment = {n: pid for pid, group in groups.items() for n in group}
    _getitems_follow_producers(nodes, groups, assignment)
    if not allows_single_node_partition:
        groups = {pid: g for pid, g in groups.items() if _compute_nodes(g) > 1}
    return [g for g in groups.values() if g]


def _getitems_follow_producers(
    nodes: list[fx.Node], groups: dict[int, set[fx.Node]], assignment: dict[fx.Node, int]
) -> None:
    """A node whose users are all getitems takes them into its partition (or out of any), until nothing moves."""
    while True:
        moves: dict[fx.Node, int | None] = {}
        for node in nodes:
            if all(_function_name(u) == _GETITEM for u in node.users):
                pid = assignment.get(node)
                for user in node.users:
                    if assignment.get(user) != pid:
                        moves[user] = pid
        if not moves:
            return
        for node, pid in moves.items():
            if node in assignment:
                groups[assignment.pop(node)].discard(node)
            if pid is not None:
                assignment[node] = pid
                groups[pid].add(node)


def _compute_nodes(group: set[fx.Node]) -> int:
    """torch.fx's count for dropping single-node partitions: call_functions other than view and getitem."""
    return sum(1 for n in group if n.op == "call_function" and _function_name(n) not in _NON_COMPUTE)


def _function_name(node: fx.Node) -> str | None:
    """torch.fx's qualified name of a call_function's target (`_operator.getitem`); None for other nodes."""
    if node.op != "call_function" or isinstance(node.target, str):
        return None
    return _get_qualified_name(node.target)
