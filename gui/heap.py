"""The window's long-lived Python objects kept out of the garbage collector's full passes.

A full collection walks every tracked object: the window alone holds ~92,000 (modules, functions, classes,
widgets' wrappers), so each took 35-43 ms of the GUI thread (~90 ms while a run trained beside it), and the
allocations of opening a file, drawing plots or a sweep's events set one off now and then (one in each open of a
500-run file). Those objects live as long as the window, so they go to the collector's permanent generation
(`gc.freeze`): a full pass then walks only what came later (the sweeps' data, plot items), a few ms.

- `freeze_long_lived()` once the window is built: no collection first (that would be a full pass on the GUI
  thread; what is garbage at start-up is a few import-time cycles).
- `refreeze()` when a sweep starts and when it ends: what was frozen comes back, one full pass collects what
  died meanwhile (the last sweep's replaced curves and data), and what lives is frozen again. One pause of
  ~40-90 ms at two moments the window changes anyway (Run pressed, the sweep's last frame).
- `thaw()` when the window closes, so a process that opens windows one after another (the tests) collects
  each one's cycles once it is closed.
"""

from __future__ import annotations

import gc


def freeze_long_lived() -> None:
    """Everything tracked now to the permanent generation, garbage included."""
    gc.freeze()


def refreeze() -> None:
    """Unfreeze, collect everything once, and freeze what lives."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def thaw() -> None:
    """The frozen objects back to the oldest generation: collected as usual from now on."""
    gc.unfreeze()
