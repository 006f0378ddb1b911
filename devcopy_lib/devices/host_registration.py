"""Pageable host buffers at pinned speed when they come back: a bounded cache of in-place registrations.

A caller who copies the same pageable buffer again and again (a Method called with the same input tensors) pays the
staging pipeline every time. `HostRegistrations` registers such a buffer in place (cudaHostRegister, through a
`Registrar`) the second time its storage is seen, so later copies take the direct DMA path; the first sight is
staged as before, and buffers under `min_bytes` are never registered (pinning costs more than their copies save).

Only memory that lives exactly as long as an object we can hold a weak reference to is registered: a NumPy array that
owns its data (a view resolves to it) or a CPU torch tensor's storage. Anything else - a bytearray, a memoryview, an
array over foreign memory (mmap, another library's buffer) - could be freed under us and is never registered. A
registration ends when its owner dies (a weakref callback, run before the memory is freed), when the cache evicts it
(least recently used first, bounded by bytes and count; never one a copy is using), or on `close()`. NumPy refuses
to resize an array that has a weak reference, so an array's memory never moves under us; a torch storage resized in
place (`resize_`) keeps its old range registered until its next copy (seen as moved: unregistered, seen anew) or its
death.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .host_buffers import array_address


class Registrar(Protocol):
    """Registers host ranges with the device (CUDA: cudaHostRegister / cudaHostUnregister)."""

    def register(self, address: int, nbytes: int) -> None: ...  # raises when the device refuses
    def unregister(self, address: int) -> None: ...
    def quiesce(self) -> None: ...  # wait for device work that may still use a range about to be unregistered


@dataclass
class RegistrationStats:
    """What the cache did (read `allocator.stats.host_registration`): buffers and bytes registered now, and counts."""

    enabled: bool = False
    registered: int = 0  # buffers registered now
    registered_bytes: int = 0
    registrations: int = 0  # successful registrations since the start
    unregistrations: int = 0  # all of them: evictions, owner deaths, moved owners, close
    evictions: int = 0  # unregistered to make room (least recently used first)
    owner_deaths: int = 0  # unregistered because the array or tensor storage died
    refused: int = 0  # registrations the device refused (memory registered elsewhere, pinning limits)
    hits: int = 0  # copies that ran through a registration


class _Entry:
    """One owner's storage: seen once (a candidate) or registered; `users` copies run through it now."""

    __slots__ = ("ref", "start", "size", "registered", "users", "failed", "doomed")

    def __init__(self, ref: weakref.ref[Any], start: int, size: int) -> None:
        self.ref, self.start, self.size = ref, start, size
        self.registered, self.users, self.failed, self.doomed = False, 0, False, False


def host_owner(buf: Any) -> tuple[Any, int, int] | None:
    """(owner, start address, bytes) of the storage behind host buffer `buf` when its lifetime is an object's we can
    hold a weak reference to: a NumPy array owning its data (views walk to it), a dense CPU torch tensor's storage;
    None for anything else (never registered)."""
    if isinstance(buf, np.ndarray):
        root = buf
        while isinstance(root.base, np.ndarray):
            root = root.base
        if root.base is not None or not root.flags.owndata or not root.nbytes:
            return None
        return root, array_address(root), root.nbytes
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(buf, torch.Tensor):
        if buf.device.type != "cpu" or buf.layout != torch.strided:
            return None
        storage = buf.untyped_storage()
        start, size = int(storage.data_ptr()), int(storage.nbytes())
        return (storage, start, size) if start and size else None
    return None


class HostRegistrations:
    """The registration cache: `acquire` before a synchronous copy of a host buffer, `release` after it."""

    def __init__(
        self, registrar: Registrar, *, min_bytes: int, max_bytes: int, max_count: int, enabled: bool = True
    ) -> None:
        self._registrar = registrar
        self.min_bytes, self.max_bytes, self.max_count = min_bytes, max_bytes, max_count
        self.stats = RegistrationStats(enabled=enabled)
        self._seen: OrderedDict[int, _Entry] = OrderedDict()  # seen once, by id(owner), oldest first
        self._registered: OrderedDict[int, _Entry] = OrderedDict()  # least recently used first
        self._lock = threading.RLock()  # an owner can die (its callback runs) inside this thread's own locked code
        self._closed = False

    @property
    def enabled(self) -> bool:
        """Whether copies register reused buffers (switchable: the benchmark times plain pageable copies with it
        off); turning it off leaves current registrations in place until eviction, death or close."""
        return self.stats.enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        self.stats.enabled = bool(value)

    def acquire(self, host: Any, nbytes: int) -> _Entry | None:
        """The registration a copy of `nbytes` of `host` runs through (release it after the copy), registering the
        buffer now when this is its second sight; None: copy as pageable (first sight, too small, not ours to
        register, refused)."""
        if not self.stats.enabled or nbytes < self.min_bytes:
            return None
        found = host_owner(host)
        if found is None or found[2] > self.max_bytes:
            return None
        owner, start, size = found
        key = id(owner)
        with self._lock:
            if self._closed:
                return None
            entry = self._registered.get(key) or self._seen.get(key)
            if entry is not None and (entry.ref() is not owner or entry.start != start or entry.size != size):
                self._forget(key, entry)  # a dead owner's id came back, or the owner's memory moved
                entry = None
            if entry is None:
                self._remember(key, owner, start, size)
                return None
            if not entry.registered and not self._register(key, entry):
                return None
            self._registered.move_to_end(key)
            entry.users += 1
            self.stats.hits += 1
            return entry

    def release(self, entry: _Entry | None) -> None:
        """The copy that acquired `entry` ended (None: it had none)."""
        if entry is None:
            return
        with self._lock:
            entry.users -= 1
            if entry.doomed and not entry.users:
                self._unregister(entry)

    def close(self) -> None:
        """Unregister everything (after the device work that may use it); registrations in use go when released."""
        with self._lock:
            self._closed = True
            entries = list(self._registered.values())
            self._registered.clear()
            self._seen.clear()
            if entries:
                self._registrar.quiesce()
            for entry in entries:
                entry.doomed = True
                if not entry.users:
                    self._unregister(entry)

    def __len__(self) -> int:
        """How many buffers are registered now (one whose owner went stays until its last copy ends)."""
        return self.stats.registered

    # ---- internals (the lock is held) -------------------------------------------------------------------------
    def _remember(self, key: int, owner: Any, start: int, size: int) -> None:
        """First sight of `owner`'s storage: a candidate, the oldest candidates dropped past 4x `max_count`."""
        self._seen[key] = _Entry(weakref.ref(owner, self._on_death(key)), start, size)
        while len(self._seen) > 4 * max(self.max_count, 1):
            self._seen.popitem(last=False)

    def _register(self, key: int, entry: _Entry) -> bool:
        """Register a candidate seen again, evicting least recently used registrations to stay in bounds; False
        when it cannot be (bounds full of registrations in use, refused before or now)."""
        if entry.failed or not self._make_room(entry.size):
            return False
        try:
            self._registrar.register(entry.start, entry.size)
        except Exception:  # the device said no (registered elsewhere, a pinning limit): copy as pageable from now on
            entry.failed = True
            self.stats.refused += 1
            return False
        del self._seen[key]
        self._registered[key] = entry
        entry.registered = True
        stats = self.stats
        stats.registrations += 1
        stats.registered += 1
        stats.registered_bytes += entry.size
        return True

    def _make_room(self, size: int) -> bool:
        """Evict idle registrations, least recently used first, until `size` more bytes and one more buffer fit."""
        stats, victims = self.stats, []
        count, total = stats.registered, stats.registered_bytes
        for key, entry in self._registered.items():
            if count < self.max_count and total + size <= self.max_bytes:
                break
            if not entry.users:
                victims.append(key)
                count, total = count - 1, total - entry.size
        if count >= self.max_count or total + size > self.max_bytes:
            return False
        if victims:
            self._registrar.quiesce()  # a stream-ordered copy may still read or write an evicted buffer
        for key in victims:
            self._unregister(self._registered.pop(key))
            stats.evictions += 1
        return True

    def _forget(self, key: int, entry: _Entry) -> None:
        """Drop `key`'s entry (its owner died or moved): unregister it now, or when its last copy ends."""
        self._seen.pop(key, None)
        if self._registered.get(key) is entry:
            del self._registered[key]
            entry.doomed = True
            if not entry.users:
                self._unregister(entry)

    def _unregister(self, entry: _Entry) -> None:
        """Give a registered range back (once) and count it."""
        if not entry.registered:
            return
        entry.registered = False
        stats = self.stats
        stats.registered -= 1
        stats.registered_bytes -= entry.size
        stats.unregistrations += 1
        self._registrar.unregister(entry.start)

    def _on_death(self, key: int) -> Any:
        """The weakref callback of the owner at `key`: unregister its storage before the memory is freed (NumPy and
        torch run weakref callbacks first)."""

        def died(ref: weakref.ref[Any]) -> None:
            with self._lock:
                entry = self._registered.get(key) or self._seen.get(key)
                if entry is None or entry.ref is not ref:
                    return
                if entry.registered:
                    self.stats.owner_deaths += 1
                self._forget(key, entry)

        return died
