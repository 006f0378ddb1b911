"""The explorer pauses Python's cyclic collector while it computes a view (widgets/collector.py): the edit's
short-lived objects die by reference count instead of being promoted into full collections over everything the
kernel holds. The pause is shared by nested and concurrent edits, ends on an error or Ctrl-C, and leaves a collector
the user turned off, off."""

import gc
import threading

import pytest
from devcopy_widgets import PlacementExplorer
from devcopy_widgets.collector import collector_paused


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_nested_pauses_end_with_the_outermost_and_an_error_still_ends_them():
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    for error in (ValueError, KeyboardInterrupt):
        with pytest.raises(error), collector_paused():
            raise error()
        assert gc.isenabled()


def test_a_collector_the_user_turned_off_stays_off():
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_two_threads_share_one_pause_and_the_last_to_end_resumes_it():
    inside, leave = threading.Event(), threading.Event()

    def other():
        with collector_paused():
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        assert inside.wait(5)
    assert not gc.isenabled()  # the other thread's edit still runs
    leave.set()
    thread.join(5)
    assert gc.isenabled()


def test_an_edit_in_the_explorer_runs_with_the_collector_paused(monkeypatch):
    explorer = PlacementExplorer(model="cpu_between")
    seen = []
    placed = explorer.state.placed
    monkeypatch.setattr(explorer.state, "placed", lambda: seen.append(gc.isenabled()) or placed())
    explorer.strategy.value = "dedupe"
    assert seen == [False] and gc.isenabled() and explorer.error is None
