"""Inter-process barrier in shared memory (stand-in for ``streaming.base.shared.barrier``).

State: three int32 in a named segment, ``entered``, ``exited`` and a go ``flag``, guarded by an
flock()ed lock file. The algorithm is the contract's, flaws included:

- the constructor resets the three values without taking the lock, so a participant constructed
  late resets a round that is under way;
- no timeout anywhere: a participant that never arrives, arrives with another count, or dies
  between rounds leaves the others polling forever (one 7 ms tick per poll);
- the lock file is created on first use and never removed.
"""

import fcntl
import os
from time import sleep

from streaming.base.constant import TICK
from streaming.base.shared.array import SharedArray

_ENTERED, _EXITED, _FLAG = 0, 1, 2


class _FileLock:
    """An flock()-based lock file, like the ``filelock`` package's Unix lock.

    Each acquire opens the file (creating it, truncating it) and polls a non-blocking flock; release
    unlocks and closes it. Acquires nest (a counter). The file is never deleted.
    """

    POLL = 0.05  # filelock's default poll interval

    def __init__(self, path: str, mode: int = 0o644) -> None:
        self.path = path
        self.mode = mode
        self._fd = -1
        self._depth = 0

    def acquire(self) -> None:
        if self._depth:
            self._depth += 1
            return
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, self.mode)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                sleep(self.POLL)
                continue
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            self._depth = 1
            return

    def release(self) -> None:
        if not self._depth:
            return
        self._depth -= 1
        if self._depth:
            return
        fd, self._fd = self._fd, -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    @property
    def is_locked(self) -> bool:
        return self._depth > 0

    def __enter__(self) -> '_FileLock':
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class SharedBarrier:
    """A barrier for a set number of processes, living in shared memory.

    Args:
        filelock_path (str): Lock file, e.g. ``$TMPDIR/000000_barrier_filelock``.
        shm_name (str): Short shm name, e.g. ``000000_barrier``.
    """

    def __init__(self, filelock_path: str, shm_name: str) -> None:
        self.filelock_path = filelock_path
        self.lock = _FileLock(filelock_path)
        self._arr = SharedArray(3, 'i', shm_name)
        # Reset unconditionally and without the lock (kept flaw).
        self._arr[_ENTERED] = 0
        self._arr[_EXITED] = -1
        self._arr[_FLAG] = 1

    @property
    def num_enter(self) -> int:
        return self._arr[_ENTERED]

    @property
    def num_exit(self) -> int:
        return self._arr[_EXITED]

    @property
    def flag(self) -> bool:
        return bool(self._arr[_FLAG])

    def __call__(self, num_procs: int) -> None:
        """Wait until ``num_procs`` processes (counted by each caller itself) have arrived."""
        arr = self._arr
        # The first call anywhere sets "exited" to the count: "the previous round is drained".
        with self.lock:
            if arr[_EXITED] == -1:
                arr[_EXITED] = num_procs

        self.lock.acquire()
        if arr[_ENTERED] == 0:
            # First to arrive: let the previous round drain, then lower the flag.
            self.lock.release()
            while arr[_EXITED] != num_procs:
                sleep(TICK)
            self.lock.acquire()
            arr[_FLAG] = 0
        arr[_ENTERED] += 1
        if arr[_ENTERED] == num_procs:
            # Last to arrive: reset the counters and raise the flag.
            arr[_ENTERED] = 0
            arr[_EXITED] = 0
            arr[_FLAG] = 1
        self.lock.release()

        while not arr[_FLAG]:
            sleep(TICK)

        with self.lock:
            arr[_EXITED] += 1
            if arr[_EXITED] == num_procs:
                arr[_EXITED] = -1
