"""FullCollections records the full garbage collections (generation 2) run while it is attached, and only those."""

import gc

from devcopy_lib.bench.measurement import FullCollections


def test_full_collections_are_counted_while_attached_and_young_ones_never():
    with FullCollections() as seen:
        gc.collect(0)
        gc.collect(1)
        assert seen.seconds == []
        gc.collect()
        assert len(seen.seconds) == 1 and seen.seconds[0] >= 0
    gc.collect()
    assert len(seen.seconds) == 1  # detached
