"""What the Triton side of the FlagGems benches needs to run at all under Triton 3.6.

FlagGems 3.0's launch cache (flag_gems.utils.libentry.LibEntry) keeps the first run's compiled kernel and calls it
again the way Triton 3.5 takes it; Triton 3.6 refuses that call ("function takes exactly 25 arguments"), so under
plain Triton every op called twice fails. bypass_launch_cache() empties the cache before each call: every launch
takes Triton's own `run`, and the baseline passes what Triton itself can run. The tilec side leaves the cache alone
(the drop-in's handle takes those calls).
"""

from __future__ import annotations

import importlib


def bypass_launch_cache() -> None:
    """Empty FlagGems' launch cache before each of its calls, in this process (flag_gems importable)."""
    libentry = importlib.import_module("flag_gems.utils.libentry")  # the package also exports a function of that name
    cached = libentry.LibEntry.run
    if getattr(cached, "_tilec_uncached", False):
        return

    def uncached(self, *args, **kwargs):
        for cache in self.kernel_cache:
            cache.clear()
        return cached(self, *args, **kwargs)

    uncached._tilec_uncached = True  # type: ignore[attr-defined]
    libentry.LibEntry.run = uncached
