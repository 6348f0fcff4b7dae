"""Stale shared-memory cleanup (stand-in for ``streaming.base.util.clean_stale_shared_memory``).

Kept flaws: no liveness check (a live job's segments go too); it goes by name, from p = 0 up to the
first p where none of the nine kinds exists (a gap hides everything above it); lock files are
ignored; a segment it cannot attach (another user's 0600 segment, a zero-length one) stops it with
that error.
"""

from streaming.base.constant import SHM_TO_CLEAN
from streaming.base.shared.memory import SharedMemory
from streaming.base.shared.prefix import _get_path


def clean_stale_shared_memory() -> None:
    """Unlink every ``{p:06}_{kind}`` from p = 0 up to the first p where nothing existed."""
    prefix_int = 0
    while True:
        found = False
        for kind in SHM_TO_CLEAN:
            try:
                shm = SharedMemory(_get_path(prefix_int, kind), False, auto_cleanup=False)
            except FileNotFoundError:
                continue
            found = True
            shm.close()
            try:
                shm.unlink()
            except FileNotFoundError:
                pass
        if not found:
            return
        prefix_int += 1
