"""`LiveBlocks`: the allocations one allocator holds and the copies running on them.

Every public call checks its pointers against this set before any native call. A copy marks its block busy for its
duration (`pin` / `unpin`); freeing a block (`retire`) takes it out of the set first, so new copies are refused, then
waits for the copies still running on it and for its stream-ordered copies still pending. One lock guards the set
and the allocator's counters; it is held for bookkeeping only, never during a copy.
"""

from __future__ import annotations

import threading
from typing import Any, NoReturn

from .errors import DeviceUsageError, InvalidArgumentTypeError
from .pointers import DeviceBlock, DevicePtr

_get_ident = threading.get_ident


class LiveBlocks:
    """The live set of one allocator (`owner`: its backend's name, for messages), and whether it was closed."""

    __slots__ = ("owner", "live", "lock", "idle", "closed")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.live: dict[int, DeviceBlock] = {}
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)  # notified when a freed block's last copy ends
        self.closed = False

    def __len__(self) -> int:
        return len(self.live)

    def add(self, block: DeviceBlock) -> None:
        """A new live block (the caller holds the lock)."""
        self.live[block.serial] = block

    def check_open(self, what: str) -> None:
        """Refuse work on a closed allocator."""
        if self.closed:
            raise DeviceUsageError(f"{what}: this {self.owner} allocator was closed; make a new one (make_allocator())")

    def own(self, ptr: DevicePtr, what: str) -> DeviceBlock:
        """The live block of `ptr`, or an error (not a DevicePtr, freed, or another allocator's)."""
        if not isinstance(ptr, DevicePtr):
            raise InvalidArgumentTypeError(
                f"{what}: expected a DevicePtr from allocate(), got {type(ptr).__name__}"
                + (" (an int is never taken as a device address)" if isinstance(ptr, int) else "")
            )
        if ptr.block.freed:
            self.check_open(what)
            raise DeviceUsageError(f"{what}: {ptr!r} was already freed (use after free or double free)")
        if self.live.get(ptr.block.serial) is not ptr.block:
            raise DeviceUsageError(f"{what}: {ptr!r} was not allocated by this {self.owner}; use its own allocator")
        return ptr.block

    def check_span(self, ptr: DevicePtr, nbytes: int, what: str) -> None:
        """`ptr` is live and `nbytes` from it fit in its allocation."""
        self.own(ptr, what)
        if nbytes > ptr.nbytes:
            raise DeviceUsageError(
                f"{what}: {nbytes} bytes do not fit in the device allocation ({ptr.nbytes} bytes from offset "
                f"{ptr.offset} of {ptr.block.nbytes}); copy at most {ptr.nbytes} bytes"
            )

    def pin(self, block: DeviceBlock, what: str) -> int:
        """Mark a copy running on `block` and return its marker (for `unpin`), refusing it when the block was freed
        since it was checked (`what`: the copy, for the message). No lock on this path: the marker goes in first,
        then `freed` is read, while `retire` sets `freed` first, then reads the markers; list appends and removes
        are atomic, so either the copy sees `freed` or `retire` sees the copy and waits for it."""
        marker = _get_ident()
        block.running.append(marker)
        if block.freed:
            block.running.remove(marker)
            self.refuse_freed(what)
        return marker

    def unpin(self, block: DeviceBlock, marker: int) -> None:
        """The copy of `marker` on `block` ended: take the marker out and wake a `retire` waiting for the block."""
        block.running.remove(marker)
        if block.freed:
            self.wake()

    def wake(self) -> None:
        """Wake the `retire` calls waiting for a freed block's copies to end."""
        with self.lock:
            self.idle.notify_all()

    def refuse_freed(self, what: str) -> NoReturn:
        """The error of a copy (`what`) on a block freed since it was checked: the allocator closed, or a use after
        free."""
        self.check_open(what)
        raise DeviceUsageError(f"{what} copy: the buffer was already freed (use after free); allocate anew")

    def keep_pending(self, block: DeviceBlock, ticket: Any) -> None:
        """Keep a stream-ordered copy's ticket with its block until it is done, so a `retire` waits for it (the
        caller holds the lock and the copy's marker)."""
        if len(block.pending) > 7:
            block.pending = [t for t in block.pending if not t.done]
        block.pending.append(ticket)

    def retire(self, block: DeviceBlock) -> None:
        """Take `block` out of the live set (new copies are refused from here) and wait until no copy uses it: the
        synchronous ones running in other threads, then the stream-ordered ones enqueued on it (the caller holds
        the lock; waiting lets it go)."""
        del self.live[block.serial]
        block.freed = True
        me = _get_ident()
        # a copy that started before `freed` was set: wait for it (see `pin`). A marker of this thread is no running
        # copy (this thread is here): an interrupt (Ctrl-C, a stop signal) left it between `pin` and `unpin`.
        while any(thread != me for thread in block.running):
            self.idle.wait()
        for ticket in block.pending:
            ticket.wait()
        block.pending = []
