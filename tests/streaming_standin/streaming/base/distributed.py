"""The launcher's view of the job and its process group (stand-in for ``streaming.base.distributed``).

Same entry points as the original: ``get_rank``, ``get_world_size``, ``get_local_rank``,
``get_local_world_size`` read the launcher's environment; ``barrier()`` is
``torch.distributed.barrier()`` when a torch process group is initialised; ``maybe_init_dist()``
initialises one from the environment (``env://``) when ``WORLD_SIZE > 1`` and none exists.

Stand-in only, for machines without torch: an *emulated* process group (``init_emulated_group``)
whose ``barrier()`` behaves like gloo's as far as Streaming can tell. Every rank of a job meets on
marker files in a directory the harness gives each trial; a rank that cannot meet its peers fails
like a gloo rank does:

- a peer process that is gone (killed, or exited without arriving) makes the barrier raise
  ``RuntimeError('... Connection closed by peer ...')`` at once, as gloo's closed TCP pair does;
- a peer that is alive but never arrives makes it raise ``RuntimeError('Timed out ...')`` after the
  group's timeout, as gloo's collectives do.

Members are identified by pid and start time (``/proc/<pid>/stat`` field 22), so a reused pid is not
mistaken for a live peer. The marker files are the harness's scaffolding in its trial directory, not
Streaming's resources.
"""

import os
import sys
import time
from typing import Optional

TICK = 0.007  # the poll interval of every wait here


def get_rank() -> int:
    return int(os.environ.get('RANK', 0))


def get_world_size() -> int:
    return int(os.environ.get('WORLD_SIZE', 1))


def get_local_rank() -> int:
    return int(os.environ.get('LOCAL_RANK', 0))


def get_local_world_size() -> int:
    return int(os.environ.get('LOCAL_WORLD_SIZE', 1))


def _torch_dist():
    try:
        from torch import distributed as dist  # pylint: disable=import-outside-toplevel
    except Exception:  # pylint: disable=broad-except
        return None
    return dist if dist.is_available() else None


def _start_time(pid: int) -> Optional[int]:
    """The process's start time in clock ticks, or None if it is gone (or a zombie)."""
    try:
        with open(f'/proc/{pid}/stat', encoding='ascii', errors='replace') as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(')') + 2:].split()
    if not fields or fields[0] in ('Z', 'X'):
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


class EmulatedGroup:
    """One job's ranks meeting on files under ``where``; see the module docstring."""

    def __init__(self, where: str, job_key: str, rank: int, world_size: int, timeout_s: float,
                 barrier_timeout_s: Optional[float] = None) -> None:
        self.stem = os.path.join(where, f'pg.{job_key}.')
        self.rank = rank
        self.world_size = world_size
        self.timeout_s = timeout_s
        self.barrier_timeout_s = timeout_s if barrier_timeout_s is None else barrier_timeout_s
        self.calls = 0
        self.members = {}

    def _write(self, path: str, text: str) -> None:
        tmp = f'{path}.tmp.{os.getpid()}'
        with open(tmp, 'w', encoding='ascii') as f:
            f.write(text)
        os.rename(tmp, path)  # peers see the whole file or none

    def _member(self, r: int):
        if r not in self.members:
            try:
                with open(f'{self.stem}member.{r}', encoding='ascii') as f:
                    pid, start = (int(x) for x in f.read().split())
            except (OSError, ValueError):
                return None
            self.members[r] = (pid, start)
        return self.members[r]

    def _gone(self, r: int) -> bool:
        m = self._member(r)
        return m is not None and _start_time(m[0]) != m[1]

    def _wait(self, what: str, present, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            missing = [r for r in range(self.world_size) if not present(r)]
            if not missing:
                return
            dead = [r for r in missing if self._gone(r)]
            if dead:
                pid = self._member(dead[0])[0]
                raise RuntimeError(f'[emulated gloo] {what}: Connection closed by peer (rank {dead[0]}, pid {pid} '
                                   f'is gone)')
            if time.monotonic() >= deadline:
                raise RuntimeError(f'[emulated gloo] {what}: Timed out waiting {int(timeout_s * 1000)}ms for '
                                   f'rank(s) {missing}')
            time.sleep(TICK)

    def join(self) -> None:
        """Like init_process_group: every rank registers, then waits for all of them."""
        me = os.getpid()
        self._write(f'{self.stem}member.{self.rank}', f'{me} {_start_time(me)}')
        self._wait('init', lambda r: os.path.exists(f'{self.stem}member.{r}'), self.timeout_s)

    def barrier(self) -> None:
        self.calls += 1
        n = self.calls
        self._write(f'{self.stem}{n}.{self.rank}', '')
        self._wait(f'barrier #{n}', lambda r: os.path.exists(f'{self.stem}{n}.{r}'), self.barrier_timeout_s)


_emulated: Optional[EmulatedGroup] = None


def init_emulated_group(where: str, job_key: str, rank: int, world_size: int, timeout_s: float,
                        barrier_timeout_s: Optional[float] = None) -> None:
    """Stand-in only: form the emulated process group (blocks until every rank joined, at most
    `timeout_s`); its barriers wait `barrier_timeout_s` for a live peer (default: `timeout_s`)."""
    global _emulated  # pylint: disable=global-statement
    group = EmulatedGroup(where, job_key, rank, world_size, timeout_s, barrier_timeout_s)
    group.join()
    _emulated = group


def emulated_group_initialized() -> bool:
    return _emulated is not None


def _torch_dist_if_imported():
    """torch.distributed if this process has imported it already, else None (no import).

    The original imports torch at module import (``prefix.py``: ``from torch import distributed``),
    so its ``dist.is_initialized()`` between the prefix walk and the create costs nothing. A lazy
    import here would put seconds of torch import into exactly that window (walk-then-create) and
    make every job that starts together collide whatever its timing (#884 reproduced for the wrong
    reason). A torch group can only be initialised if torch.distributed is imported, so without it
    there is none to wait for."""
    dist = sys.modules.get('torch.distributed')
    return dist if dist is not None and dist.is_available() else None


def barrier() -> None:
    """Synchronise the job's ranks: torch's group if initialised, else the emulated one, else nothing."""
    dist = _torch_dist_if_imported()
    if dist is not None and dist.is_initialized():
        dist.barrier()
    elif _emulated is not None:
        _emulated.barrier()


def maybe_init_dist() -> bool:
    """As the original: initialise torch.distributed from the environment when there is more than one
    rank and no group yet; say whether we did. Without torch (or with the emulated group) nothing."""
    if get_world_size() == 1:
        return False  # before importing torch: a single process pays nothing for a group it never forms
    dist = _torch_dist()
    if dist is None or dist.is_initialized() or _emulated is not None:
        return False
    dist.init_process_group(backend='gloo', rank=get_rank(), world_size=get_world_size())
    return True
