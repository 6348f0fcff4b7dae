"""Register or look up a job's shared-memory prefix (stand-in for ``streaming.base.shared.prefix``).

The contract (docs/streaming.md): every rank walks p = 0, 1, 2, ... over the nine segment kinds,
picks the largest first gap, the local leader registers ``{p:06}_locals``, the other ranks check the
record. Kept flaws, on purpose:

- walk-then-create is not atomic: two jobs starting together pick the same p and the loser's leader
  fails with ``File exists: .../000000_locals``;
- ranks walk at different moments and may disagree on p ("registered does not match local
  leader", "not registered by local leader");
- a prefix with a lock file in $TMPDIR is skipped before its ``locals`` is checked, so a live job
  that has used its barrier is invisible, and lock files (never deleted) make prefixes climb;
- the walk stops at the first gap, missing a live job above it;
- every handle attached during the walk stays open until the process exits (fd leak);
- a zero-length ``locals`` makes every walk fail ("cannot mmap an empty file");
- without an initialised torch.distributed there is no cross-rank barrier at all (the stand-in
  can emulate one, opt-in: see ``_emulated_process_group_barrier``).
"""

import os
import struct
from collections import Counter
from tempfile import gettempdir
from time import sleep
from typing import List, Optional, Sequence, Tuple

from streaming.base.constant import BARRIER_FILELOCK, CACHE_FILELOCK, LOCALS, SHM_TO_CLEAN, TICK
from streaming.base.shared.memory import SharedMemory, name_root
from streaming.base.world import World

_LEN = struct.Struct('=i')  # int32, native byte order, as the original's numpy int32


def _get_path(prefix_int: int, kind: str) -> str:
    """Short name of one segment or lock file: ``000003_barrier``."""
    return f'{prefix_int:06}_{kind}'


def _lock_file(prefix_int: int, lock_kind: str) -> str:
    # Stand-in only: $SHMSTRESS_ROOT in front of the file name.
    return os.path.join(gettempdir(), name_root() + _get_path(prefix_int, lock_kind))


def _pack_locals(dirnames: Sequence[str], prefix_int: int) -> bytes:
    """``int32 total length`` + ``dir1\\0dir2\\0...\\0<prefix as decimal>`` (UTF-8)."""
    body = ('\0'.join(dirnames) + '\0' + str(prefix_int)).encode('utf-8')
    return _LEN.pack(_LEN.size + len(body)) + body


def _unpack_locals(data: bytes) -> Tuple[List[str], int]:
    """Inverse of ``_pack_locals``; a length of 0 reads as "no dirs, prefix 0" (released)."""
    (total,) = _LEN.unpack_from(data, 0)
    fields = data[_LEN.size:total].decode('utf-8').split('\0')
    return fields[:-1], int(fields[-1] or 0)


def _check_self(streams_local: Sequence[str]) -> None:
    dups = sorted(d for d, n in Counter(streams_local).items() if n > 1)
    if dups:
        raise ValueError(f'Reused local directory: {dups}. Provide a different one.')


def _walk(streams_local: Sequence[str], streams_remote: Sequence[Optional[str]], kind: str) -> int:
    """First p at which ``{p:06}_{kind}`` does not exist, checking ``locals`` records on the way."""
    p = 0
    while True:
        try:
            if any(os.path.exists(_lock_file(p, lk)) for lk in (BARRIER_FILELOCK, CACHE_FILELOCK)):
                p += 1
                continue
        except PermissionError:
            p += 1
            continue
        try:
            shm = SharedMemory(_get_path(p, kind), False)  # kept open until exit (fd leak)
        except PermissionError:
            p += 1
            continue
        except FileNotFoundError:
            return p
        if kind == LOCALS and any(streams_remote):
            theirs, _ = _unpack_locals(bytes(shm.buf))
            for local, remote in zip(streams_local, streams_remote):
                if remote is not None and local in theirs:
                    raise ValueError(f'Reused local directory: {list(streams_local)} vs {theirs}. Provide a '
                                     f'different one. If using a unique local directory, try deleting the '
                                     f'local directory and call `streaming.base.util.clean_stale_shared_memory()` '
                                     f'only once in your script to clean up the stale shared memory before '
                                     f'instantiation of `StreamingDataset`.')
        p += 1


def _walk_retrying(streams_local: Sequence[str], streams_remote: Sequence[Optional[str]], kind: str,
                   retry: int) -> int:
    """``_walk``, again one tick later on any ValueError, ``retry`` more times."""
    if retry < 0:
        raise ValueError(f'Specify at least zero retries (provided {retry}).')
    last: Optional[ValueError] = None
    for _ in range(retry + 1):
        try:
            return _walk(streams_local, streams_remote, kind)
        except ValueError as err:
            last = err
            sleep(TICK)
    assert last is not None
    raise last


def _dist_barrier() -> None:
    """``torch.distributed.barrier()`` if a process group is initialised; nothing otherwise."""
    try:
        from torch import distributed as dist  # pylint: disable=import-outside-toplevel
    except Exception:  # pylint: disable=broad-except
        dist = None
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.barrier()
        return
    _emulated_process_group_barrier()


_pg_calls = 0


def _emulated_process_group_barrier() -> None:
    """Stand-in only, opt-in: what ``dist.barrier()`` does in a job with a process group.

    Off unless ``$SHMSTRESS_STANDIN_PROCESS_GROUP=file``, so by default the stand-in behaves like
    the original without torch.distributed (no cross-rank ordering at all). When on, the ``WORLD_SIZE``
    ranks of the job ``$SHMSTRESS_JOB_KEY`` meet on marker files ``<dir>/<root>pg.<job>.<n>.<rank>``
    (n counts this process's calls), where <dir> is the directory of ``$SHMSTRESS_EVENTS`` (the
    harness's trial directory: the markers are scaffolding, not Streaming's own leftovers) if it is
    writable, else $TMPDIR. Like a process group without a timeout, a rank that never arrives leaves
    the others waiting.
    """
    global _pg_calls  # pylint: disable=global-statement
    if os.environ.get('SHMSTRESS_STANDIN_PROCESS_GROUP') != 'file':
        return
    world_size = int(os.environ.get('WORLD_SIZE') or 1)
    if world_size <= 1:
        return
    rank = int(os.environ.get('RANK') or 0)
    _pg_calls += 1
    where = os.path.dirname(os.environ.get('SHMSTRESS_EVENTS', ''))
    if not where or not os.access(where, os.W_OK):
        where = gettempdir()
    stem = os.path.join(where, f"{name_root()}pg.{os.environ.get('SHMSTRESS_JOB_KEY', 'job')}.{_pg_calls}.")
    with open(stem + str(rank), 'a', encoding='utf-8'):
        pass
    while not all(os.path.exists(stem + str(r)) for r in range(world_size)):
        sleep(TICK)


def get_shm_prefix(streams_local: List[str],
                   streams_remote: List[Optional[str]],
                   world: World,
                   retry: int = 100) -> Tuple[int, SharedMemory]:
    """Register (local leader) or look up (other ranks) this job's shared-memory prefix.

    Args:
        streams_local (List[str]): Local dir of each stream.
        streams_remote (List[Optional[str]]): Remote of each stream, or None.
        world (World): This process's coordinates.
        retry (int): Extra walks, one tick apart, on a ValueError. Defaults to 100.

    Returns:
        Tuple[int, SharedMemory]: The prefix and our handle on ``{prefix:06}_locals``.
    """
    _check_self(streams_local)
    prefix_int = max(_walk_retrying(streams_local, streams_remote, kind, retry) for kind in SHM_TO_CLEAN)

    _dist_barrier()
    name = _get_path(prefix_int, LOCALS)
    if world.is_local_leader:
        record = _pack_locals(streams_local, prefix_int)
        shm = SharedMemory(name, True, len(record))
        shm.buf[:len(record)] = record

    _dist_barrier()
    if not world.is_local_leader:
        try:
            shm = SharedMemory(name, False)
        except FileNotFoundError as err:
            raise RuntimeError(f'Internal error: shared memory prefix={prefix_int} was not registered by local '
                               f'leader. This may be because you specified different ``local`` parameters '
                               f'from different ranks.') from err
        their_locals, their_prefix = _unpack_locals(bytes(shm.buf))
        if list(streams_local) != their_locals or prefix_int != their_prefix:
            raise RuntimeError(f'Internal error: shared memory registered does not match local leader as '
                               f'streams_local or prefix_int not match. local leader: {their_locals} and '
                               f'{their_prefix}. expected: {list(streams_local)} and {prefix_int}.')
    return prefix_int, shm
