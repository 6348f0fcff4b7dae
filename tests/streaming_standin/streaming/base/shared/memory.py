"""POSIX shared memory by name (stand-in for ``streaming.base.shared.memory``).

Like the original, a thin layer over CPython's ``multiprocessing.shared_memory.SharedMemory``, so
everything CPython does underneath happens here too:

- create (``create=True``): ``shm_open(O_CREAT|O_EXCL, 0600)``, ``ftruncate``, ``mmap``; the name is
  registered with CPython's per-process **resource tracker**, a child process started on first use.
  If the creating process dies without unlinking (SIGKILL of the process alone), the tracker, which
  outlives it, unlinks every name still registered and warns about "leaked shared_memory objects".
  Only a kill of the whole process tree (tracker included) really leaks the segment.
- attach (``create=False``): opens and maps whatever size the segment has now; a segment of length
  0 (not sized yet, or left so) fails ``ValueError: cannot mmap an empty file``. Attaches are kept
  out of the tracker, as the original does.
- create-or-attach (``create=None``): create; if it exists, sleep one tick and attach.
- every handle keeps its fd and the mapping's own duplicate open; with ``auto_cleanup`` an exit
  handler holds the handle until exit (the walk's fd leak), then closes it and, for a segment this
  process created, unlinks it *by name* (even if the name now belongs to another job).

Stand-in only: the name gets ``$SHMSTRESS_ROOT`` in front (read at open time) when it is set.
"""

import atexit
import contextlib
import os
from multiprocessing import resource_tracker
from multiprocessing.shared_memory import SharedMemory as _CPythonSharedMemory
from time import sleep
from typing import Optional

from streaming.base.constant import TICK

SHM_DIR = '/dev/shm'


def name_root() -> str:
    """The prefix every shm and lock-file name built by this package gets (stand-in only)."""
    return os.environ.get('SHMSTRESS_ROOT', '')


def shm_path(name: str) -> str:
    """The POSIX shm name (leading slash) for a short name, with the stand-in's root."""
    return '/' + name_root() + name


@contextlib.contextmanager
def _untracked():
    """Keep an attach out of the resource tracker: the creator is the one responsible for it."""
    original = resource_tracker.register

    def register(name, rtype):
        if rtype != 'shared_memory':
            original(name, rtype)

    resource_tracker.register = register
    try:
        yield
    finally:
        resource_tracker.register = original


class SharedMemory:
    """A named shared-memory segment.

    Args:
        name (str): Short name, e.g. ``000000_locals``.
        create (bool, optional): ``True`` create (exclusive), ``False`` attach, ``None`` create,
            or attach if it exists.
        size (int): Bytes, when creating.
        auto_cleanup (bool): Register the exit handler (close; unlink if we created it).
    """

    def __init__(self, name: str, create: Optional[bool] = None, size: int = 0, auto_cleanup: bool = True) -> None:
        self.name = name
        self.path = shm_path(name)
        self.created = False
        full = name_root() + name
        if create is True:
            self.shm = _CPythonSharedMemory(full, True, size)
            self.created = True
        elif create is False:
            with _untracked():
                self.shm = _CPythonSharedMemory(full, False, size)
        else:
            try:
                self.shm = _CPythonSharedMemory(full, True, size)
                self.created = True
            except FileExistsError:
                sleep(TICK)
                with _untracked():
                    self.shm = _CPythonSharedMemory(full, False, size)
        if auto_cleanup:
            atexit.register(self.cleanup)  # holds this handle (and its fds) until exit

    @property
    def buf(self) -> memoryview:
        """The mapped bytes."""
        return self.shm.buf

    @property
    def size(self) -> int:
        return self.shm.size

    def fileno(self) -> int:
        """The fd this handle holds (stand-in only: the adapter fstat()s it)."""
        return self.shm._fd  # pylint: disable=protected-access

    def close(self) -> None:
        """Unmap and close our fds; the segment stays."""
        self.shm.close()

    def unlink(self) -> None:
        """Remove the name (whoever's segment carries it now); the tracker forgets it."""
        self.shm.unlink()

    def cleanup(self) -> None:
        """Exit handler: close; unlink by name if this process created the segment."""
        try:
            self.close()
        except Exception:  # pylint: disable=broad-except
            pass
        if self.created:
            self.created = False
            try:
                self.unlink()
            except FileNotFoundError:
                pass
