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
- every rank walks *before* the first group barrier, so a non-leader can walk while another job
  registers and end on another prefix than its leader; without a process group (neither torch's
  nor the stand-in's emulated one, ``streaming.base.distributed``) there is no cross-rank ordering
  at all.

Upstream's fixes for the non-leader's check, switchable with ``$SHMSTRESS_STANDIN_VARIANT``:
``pr966`` (merged: retry the attach while ``{p:06}_locals`` is missing, ``retry`` times one tick
apart) and ``pr985`` (open: retry attach *and* unpack/compare with ``util.retry``'s exponential
TICK backoff, then say "not registered" or "does not match"). Unset: the v0.14 code.
"""

import os
import random
import struct
from collections import Counter
from tempfile import gettempdir
from time import sleep
from typing import List, Optional, Sequence, Tuple

from streaming.base import distributed
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
    """The job's ``dist.barrier()``: torch's process group, the stand-in's emulated one, or nothing."""
    distributed.barrier()


VARIANT_ENV = 'SHMSTRESS_STANDIN_VARIANT'
PR985_ATTEMPTS = 8  # assumed: the PR names util.retry with TICK backoff but no attempt count here


class _SharedMemoryNotReady(Exception):
    """pr985: the record is there but not (yet) readable or not (yet) ours."""


def _not_registered(prefix_int: int) -> RuntimeError:
    return RuntimeError(f'Internal error: shared memory prefix={prefix_int} was not registered by local leader. '
                        f'This may be because you specified different ``local`` parameters from different ranks.')


def _mismatch(prefix_int: int, streams_local, their_locals, their_prefix) -> RuntimeError:
    return RuntimeError(f'Internal error: shared memory registered does not match local leader as streams_local '
                        f'or prefix_int not match. local leader: {their_locals} and {their_prefix}. expected: '
                        f'{list(streams_local)} and {prefix_int}.')


def _attach_once(name: str, prefix_int: int) -> SharedMemory:
    try:
        return SharedMemory(name, False)
    except FileNotFoundError as err:
        raise _not_registered(prefix_int) from err


def _attach_retrying_pr966(name: str, prefix_int: int, retry: int) -> SharedMemory:
    """Upstream PR #966 (merged): a non-leader retries the attach while the name is missing."""
    for _ in range(retry):
        try:
            return SharedMemory(name, False)
        except FileNotFoundError:
            sleep(TICK)
    return _attach_once(name, prefix_int)


def _check_record(shm: SharedMemory, streams_local, prefix_int: int) -> None:
    their_locals, their_prefix = _unpack_locals(bytes(shm.buf))
    if list(streams_local) != their_locals or prefix_int != their_prefix:
        raise _mismatch(prefix_int, streams_local, their_locals, their_prefix)


def _attach_and_validate_pr985(name: str, streams_local, prefix_int: int) -> SharedMemory:
    """Upstream PR #985 (open): retry attach *and* unpack/compare until they succeed, with
    ``util.retry``'s backoff (TICK * 2**i + up to TICK jitter); when that runs out, one last probe
    says "not registered" or "does not match"."""
    for i in range(PR985_ATTEMPTS):
        try:
            shm = SharedMemory(name, False)
        except FileNotFoundError:
            pass
        else:
            try:
                their_locals, their_prefix = _unpack_locals(bytes(shm.buf))
                if list(streams_local) == their_locals and prefix_int == their_prefix:
                    return shm
            except ValueError:
                pass
        if i + 1 < PR985_ATTEMPTS:
            sleep(TICK * 2**i + random.random() * TICK)
    shm = _attach_once(name, prefix_int)
    _check_record(shm, streams_local, prefix_int)
    return shm


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
        variant = os.environ.get(VARIANT_ENV, '')
        if variant == 'pr985':
            shm = _attach_and_validate_pr985(name, streams_local, prefix_int)
        else:
            if variant == 'pr966':
                shm = _attach_retrying_pr966(name, prefix_int, retry)
            else:
                shm = _attach_once(name, prefix_int)
            _check_record(shm, streams_local, prefix_int)
    return prefix_int, shm
