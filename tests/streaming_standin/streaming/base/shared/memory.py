"""POSIX shared memory by name (stand-in for ``streaming.base.shared.memory``).

Behaves like the original's wrapper around Python's ``multiprocessing.shared_memory``, minus the
per-process resource tracker:

- create: exclusive create, mode 0600, size it, map it;
- attach: open, map whatever size it has now (a segment that is not sized yet, or was left at
  length 0, fails with ``ValueError: cannot mmap an empty file``);
- create-or-attach (``create=None``): try to create; if it exists, sleep one tick and attach;
- every handle registers an exit handler (``auto_cleanup``) that closes it and, for a segment this
  process created, unlinks it *by name*. Kept flaws: that registration keeps every handle (two fds
  each: the shm fd and the mapping's own duplicate) open until the process exits, and the exit
  handler unlinks whatever now carries the name, even another job's segment.

Stand-in only: the name gets ``$SHMSTRESS_ROOT`` in front (read at open time) when it is set.
"""

import atexit
import mmap
import os
from time import sleep
from typing import Optional

from streaming.base.constant import TICK

try:
    import _posixshmem
except ImportError:  # pragma: no cover - Linux CPython always has it
    _posixshmem = None

SHM_DIR = '/dev/shm'


def name_root() -> str:
    """The prefix every shm and lock-file name built by this package gets (stand-in only)."""
    return os.environ.get('SHMSTRESS_ROOT', '')


def shm_path(name: str) -> str:
    """The POSIX shm name (leading slash) for a short name, with the stand-in's root."""
    return '/' + name_root() + name


def _shm_open(path: str, flags: int, mode: int = 0o600) -> int:
    if _posixshmem is not None:
        return _posixshmem.shm_open(path, flags, mode=mode)
    return os.open(SHM_DIR + path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def _shm_unlink(path: str) -> None:
    if _posixshmem is not None:
        _posixshmem.shm_unlink(path)
    else:
        os.unlink(SHM_DIR + path)


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
        self._fd = -1
        self._mmap = None
        self._buf = None
        if create is True:
            self._open(True, size)
        elif create is False:
            self._open(False, 0)
        else:
            try:
                self._open(True, size)
            except FileExistsError:
                sleep(TICK)
                self._open(False, 0)
        if auto_cleanup:
            atexit.register(self.cleanup)  # holds this handle (and its fds) until exit

    def _open(self, create: bool, size: int) -> None:
        if create and size <= 0:
            raise ValueError("'size' must be a positive number different from zero")
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = _shm_open(self.path, flags, 0o600)
        try:
            if create:
                self.created = True
                os.ftruncate(fd, size)
            size = os.fstat(fd).st_size
            self._mmap = mmap.mmap(fd, size)  # size 0: ValueError('cannot mmap an empty file')
        except OSError:
            os.close(fd)
            if create:
                self.created = False
                _shm_unlink(self.path)
            raise
        except ValueError:
            os.close(fd)
            raise
        self._fd = fd
        self._buf = memoryview(self._mmap)

    @property
    def buf(self) -> memoryview:
        """The mapped bytes."""
        return self._buf

    @property
    def size(self) -> int:
        return len(self._mmap) if self._mmap is not None else 0

    def close(self) -> None:
        """Unmap and close our fds; the segment stays."""
        if self._buf is not None:
            self._buf.release()
            self._buf = None
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def unlink(self) -> None:
        """Remove the name (whoever's segment carries it now)."""
        _shm_unlink(self.path)

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
