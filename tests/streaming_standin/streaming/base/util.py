"""Stale shared-memory cleanup (stand-in for ``streaming.base.util.clean_stale_shared_memory``).

Behaves like the original, flaws included:

- it initialises torch.distributed itself when ``WORLD_SIZE > 1`` and no group exists (which needs
  the launcher's ``MASTER_ADDR``/``MASTER_PORT``), only the local rank 0 cleans, and every rank then
  meets at the group barrier;
- from p = 0 upward, for each of the nine kinds it first *creates* a 4-byte probe segment
  ``{p:06}_{kind}`` (exclusive create): if that succeeds nothing was there, and the probe is closed
  and unlinked again; if the name exists, it attaches and unlinks the segment it found. So for a
  moment the cleanup itself owns names a starting job may try to create;
- a segment it may not open (another user's 0600 segment) is skipped; a zero-length one stops it
  with ``ValueError: cannot mmap an empty file``;
- no liveness check (a live job's segments go too), by name, lock files ignored; it stops at the
  first p where none of the nine kinds existed (a gap hides everything above it).
"""

from multiprocessing.shared_memory import SharedMemory as _CPythonSharedMemory

from streaming.base import distributed
from streaming.base.constant import SHM_TO_CLEAN
from streaming.base.shared.memory import name_root
from streaming.base.shared.prefix import _get_path


def clean_stale_shared_memory() -> None:
    """Unlink every ``{p:06}_{kind}`` from p = 0 up to the first p where nothing existed."""
    destroy = distributed.maybe_init_dist()
    if distributed.get_local_rank() == 0:
        root = name_root()
        for prefix_int in range(1000000):
            leaked = False
            for kind in SHM_TO_CLEAN:
                name = root + _get_path(prefix_int, kind)
                try:
                    shm = _CPythonSharedMemory(name, True, 4)  # a probe: nothing was there
                except FileExistsError:
                    try:
                        shm = _CPythonSharedMemory(name, False, 4)
                    except PermissionError:
                        continue
                    leaked = True
                shm.close()
                shm.unlink()
            if not leaked:
                break
    distributed.barrier()
    if destroy:
        from torch import distributed as dist  # pylint: disable=import-outside-toplevel
        dist.destroy_process_group()
