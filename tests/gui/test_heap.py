"""The window's long-lived objects out of the garbage collector's full passes (gui/heap.py): a full pass over the
~92,000 objects of a window took 35-43 ms of the GUI thread, and one landed in each open of a 500-run file."""

from __future__ import annotations

import gc
import weakref

from batchlab.gui.heap import freeze_long_lived, refreeze, thaw


class Node:
    def __init__(self):
        self.me = self  # a cycle: only the collector frees it


def test_a_built_window_is_frozen_so_a_full_pass_walks_only_what_came_later(main_window):
    frozen = gc.get_freeze_count()
    assert frozen > 10_000
    assert len(gc.get_objects()) < frozen / 2  # what a full pass walks now (the frozen ones are not in it)
    main_window.close()
    assert gc.get_freeze_count() == 0  # closed: collected as usual again


def test_refreeze_collects_what_died_while_frozen_and_freezes_what_lives():
    try:
        dead, alive = Node(), Node()
        dead_ref, alive_ref = weakref.ref(dead), weakref.ref(alive)
        freeze_long_lived()
        del dead
        gc.collect()
        assert dead_ref() is not None  # frozen: a full pass does not see it
        refreeze()
        assert dead_ref() is None and alive_ref() is alive
        assert gc.get_freeze_count() > 0
    finally:
        thaw()
