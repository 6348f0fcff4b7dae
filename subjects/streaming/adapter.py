#!/usr/bin/python3
"""shmstress subject adapter for MosaicML Streaming (worker protocol v2, docs/worker-protocol.md).

Run by the harness as ``/usr/bin/python3 subjects/streaming/adapter.py worker`` with the trial's
environment. It drives Streaming's public API only:

- ``streaming.base.world.World.detect()``
- ``streaming.base.shared.prefix.get_shm_prefix(locals, remotes, world)``
- ``streaming.base.shared.barrier.SharedBarrier(f"{tmpdir}/{prefix:06}_barrier_filelock",
  f"{prefix:06}_barrier")`` called as ``barrier(num_procs)``
- ``streaming.base.shared.memory.SharedMemory(name, create, size, auto_cleanup)`` for job segments
- ``streaming.base.util.clean_stale_shared_memory()``
- ``streaming.base.distributed.barrier()`` (the job's ``dist.barrier()``)

in the order ``StreamingDataset`` does, inside a per-job torch.distributed gloo process group when
torch is importable (or one that hangs on a dead peer as NCCL's does: SHMSTRESS_PROCESS_GROUP=nccl-like),
and writes the same events as the native worker (``harness/worker.cc``). See docs/streaming.md.

Exit codes: 0 every op succeeded, 1 an op failed (a ``fail`` event says which), 2 bad environment
(no event log, unparsable SHMSTRESS_OPS/SHMSTRESS_DIRS, bad argv), 3 the subject is not available
here (``streaming`` cannot be imported, or it would touch the machine's real names; a
``{"type": "subject", "available": false, "reason": ...}`` event says why), 70 a bug in this adapter.

Standard library only, except that it forms the job's process group with torch.distributed (gloo)
when torch is importable, as a launcher would before the training script builds its dataset.
"""

import contextlib
import errno
import json
import os
import pickle
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
import zlib

# The protocol's shared writing (subjects/_common), beside this subject's folder.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '_common'))
# pylint: disable=wrong-import-position
from shmstress_protocol import (EXIT_BAD_ENV, EXIT_BUG, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, SHM_DIR,  # noqa: E402
                                append_line, cpu_wait_ns, env_int, lines, mono_ns)

REMOTE_SCHEME = 'shmstress-remote://'  # any non-None remote: Streaming only checks "is not None"

# The job's process group: SHMSTRESS_PROCESS_GROUP = auto (default) | gloo | emulated | nccl-like | none.
GROUP_ENV = 'SHMSTRESS_PROCESS_GROUP'
GROUP_MODES = ('auto', 'gloo', 'emulated', 'nccl-like', 'none')
# nccl-like: how long a collective waits for a peer that is gone. torch 1.13's NCCL default
# (default_pg_timeout, 30 min): longer than any trial, so the trial's own timeout ends the hang.
NCCL_TIMEOUT_ENV = 'SHMSTRESS_NCCL_TIMEOUT_MS'
NCCL_DEFAULT_TIMEOUT_MS = 30 * 60 * 1000
PORT_BASE, PORT_SPAN, PORT_ATTEMPTS = 10000, 22000, 16  # below Linux's ephemeral range (32768-60999)
# The epoch's segments: StreamingDataset._share_work creates them when an epoch begins (after every
# dataset of the script was constructed), with auto_cleanup=False.
EPOCH_SEGMENTS = ('epoch_shape', 'epoch_data')


# ---------------------------------------------------------------------------------------------
# Events


class EventLog:
    """The trial's history file, appended one whole line per write(2)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def from_env(cls, inherited_fd: bool = True) -> 'EventLog':
        """inherited_fd=False: a spawn-started process, which did not inherit SHMSTRESS_EVENTS_FD (its
        number may be another file there): the history's path only."""
        fd = env_int('SHMSTRESS_EVENTS_FD', -1) if inherited_fd else -1
        if fd >= 0:
            try:
                os.fstat(fd)
                return cls(fd)
            except OSError:
                pass
        path = os.environ.get('SHMSTRESS_EVENTS', '')
        if not path:
            return cls(-1)
        try:
            return cls(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666))
        except OSError:
            return cls(-1)

    def ok(self) -> bool:
        return self.fd >= 0

    def emit(self, event: dict) -> None:
        event.setdefault('t', mono_ns())
        try:
            for line in lines(event):
                append_line(self.fd, line)
        except OSError:
            pass  # nowhere left to report it


class Worker:
    """Identity of this worker and its event sequence."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.job = env_int('SHMSTRESS_JOB', -1)
        self.rank = env_int('SHMSTRESS_RANK', -1)
        self.local_rank = env_int('SHMSTRESS_LOCAL_RANK', self.rank)
        self.worker = -1  # >= 0: this process is that DataLoader worker of its rank
        self.next_id = 0
        self.open_op = None  # the Op whose invoke is written and whose completion is not

    def emit(self, type_: str, **fields) -> None:
        event = {'t': mono_ns(), 'type': type_, 'pid': os.getpid(), 'job': self.job, 'rank': self.rank,
                 'local_rank': self.local_rank}
        if self.worker >= 0:
            event['worker'] = self.worker
        event.update(fields)
        self.log.emit(event)

    def announce(self, role: str) -> None:
        """The process's first event (protocol v2): who it is, so the harness can follow it."""
        self.emit('start', role=role, ppid=os.getppid())


class GroupError(Exception):
    """The job's process group could not be formed (a peer dead or missing): the rank fails with it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def peer_gone(text: str) -> bool:
    """Is this a process-group error saying a peer is gone (gloo's closed TCP pair, the emulated
    group's "Connection closed by peer")?"""
    lowered = text.lower()
    return 'connection closed' in lowered or 'connection reset' in lowered or 'broken pipe' in lowered


def classify(exc: BaseException) -> dict:
    """A Python exception as a protocol error ``{code, message, errno}``.

    Streaming's own failures get Streaming's names (``file-exists``, ``not-registered-by-leader``,
    ``registered-mismatch``, ``empty-file``), which scenarios name as evidence
    (``error:acquire:file-exists``). Where a checker reads shmcoord's code, that code is kept:
    ``in-use`` ("Reused local directory", prefix.exclusive-local), ``broken`` (a dead or vanished
    process-group peer: "Connection closed by peer") and ``timeout`` (the group's deadline), both read
    by barrier.liveness.
    """
    text = str(exc)
    message = f'{type(exc).__name__}: {text}' if text else type(exc).__name__
    err = exc.errno if isinstance(exc, OSError) and isinstance(exc.errno, int) else 0
    lowered = text.lower()
    if isinstance(exc, GroupError):
        code = exc.code
    elif isinstance(exc, KeyboardInterrupt) or (isinstance(exc, RuntimeError) and text.startswith('KeyboardInterrupt')):
        # SIGINT (Ctrl-C) cut the op off; only a loader worker lives to say so. A KeyboardInterrupt
        # raised while libtorch's C++ holds the call (the DataLoader's SIGCHLD check, say) comes out
        # as RuntimeError('KeyboardInterrupt: <EMPTY MESSAGE>'): the same interrupt.
        code = 'interrupted'
    elif 'Reused local directory' in text:
        code = 'in-use'
    elif 'not registered by local leader' in text:
        code = 'not-registered-by-leader'
    elif 'does not match local leader' in text:
        code = 'registered-mismatch'
    elif isinstance(exc, ValueError) and 'empty file' in text:
        code = 'empty-file'
    elif isinstance(exc, FileExistsError):
        code = 'file-exists'
    elif isinstance(exc, PermissionError):
        code = 'permission'
    elif isinstance(exc, FileNotFoundError):
        code = 'not-found'
    elif isinstance(exc, OSError) and err in (errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.ENOMEM):
        code = 'exhausted'
    elif isinstance(exc, RuntimeError) and peer_gone(text):
        code = 'broken'  # gloo: a peer of the job's process group is gone
    elif isinstance(exc, RuntimeError) and 'timed out' in lowered:
        code = 'timeout'  # gloo: the group's timeout (the acquire deadline)
    else:
        code = 'io'
    return {'code': code, 'message': message, 'errno': err}


@contextlib.contextmanager
def interrupt_deferred():
    """A Ctrl-C arriving while an op's event is written and its state updated is raised right after,
    so the op is either not invoked yet or open (Worker.open_op) or completed: never invoked and
    lost. Main thread only, where every op runs."""
    got = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if got and callable(old):
            old(signal.SIGINT, None)
        elif got and old == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGINT)


class Op:
    """invoke now; ok(value) or fail(exception) later."""

    def __init__(self, worker: Worker, name: str, args: dict = None) -> None:
        self.worker = worker
        self.name = name
        worker.next_id += 1
        self.id = worker.next_id
        # t before the CPU wait at an invoke, after it at a completion: an op is never excused more
        # than the scheduler took from it (docs/worker-protocol.md, cpu_wait_ns).
        t = mono_ns()
        with interrupt_deferred():
            worker.emit('invoke', op=name, id=self.id, args=args if args is not None else {}, **self._wait(), t=t)
            worker.open_op = self

    @staticmethod
    def _wait() -> dict:
        wait = cpu_wait_ns()
        return {'cpu_wait_ns': wait} if wait >= 0 else {}

    def _complete(self, type_: str, **fields) -> None:
        with interrupt_deferred():
            if self.worker.open_op is self:
                self.worker.open_op = None
            self.worker.emit(type_, op=self.name, id=self.id, **fields, **self._wait(), t=mono_ns())

    def ok(self, value: dict = None) -> None:
        self._complete('ok', value=value if value is not None else {})

    def fail(self, exc: BaseException, **extra) -> None:
        self._complete('fail', error=classify(exc), **extra)


# ---------------------------------------------------------------------------------------------
# Helpers


def sleep_range(rng: random.Random, spec) -> None:
    """Sleep a uniform number of ms in [lo, hi] (or a fixed number)."""
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        ms = spec
    elif isinstance(spec, list) and len(spec) == 2:
        lo, hi = int(spec[0]), int(spec[1])
        ms = rng.randint(lo, hi) if hi > lo else lo
    else:
        return
    if ms > 0:
        time.sleep(ms / 1000.0)


def count_fds() -> int:
    try:
        return len(os.listdir('/proc/self/fd')) - 1  # minus the listing's own fd, as the native worker
    except OSError:  # e.g. EMFILE: no fd left to list them with
        return -1


def _limit_spec(when: str):
    try:
        spec = json.loads(os.environ.get('SHMSTRESS_LIMIT_AT', 'null'))
    except ValueError:
        return None
    if not isinstance(spec, dict) or spec.get('when') != when or spec.get('resource') not in ('nofile', 'as'):
        return None
    return spec


class Limited:
    """The `rlimit` fault (SHMSTRESS_LIMIT_AT, as the native worker reads it): RLIMIT_NOFILE or
    RLIMIT_AS lowered to what the process uses now plus `free`, and lifted after. For `clean` it
    holds over the whole cleanup. For `acquire` and `attach` it holds around each attach of an
    existing segment the step makes through CPython's SharedMemory: the step also starts gloo's
    threads, which a whole-step limit kills outright ("cannot allocate memory for thread-local
    data"), while the harm is where the process maps — CPython 3.11's SharedMemory unlinks a
    segment it attached to when its mmap fails (gh-153279)."""

    def __init__(self, when: str) -> None:
        self.when = when
        self.res = None
        self.old = None
        self.patched = None

    def lower(self, spec: dict) -> None:
        free = int(spec.get('free', 0) or 0)
        if spec['resource'] == 'nofile':
            res = resource.RLIMIT_NOFILE
            top = max((int(x) for x in os.listdir('/proc/self/fd')), default=0)
            cur = max(count_fds() + free, top + 1)
        else:
            res = resource.RLIMIT_AS
            vm = -1
            with open('/proc/self/status', encoding='ascii', errors='replace') as f:
                for line in f:
                    if line.startswith('VmSize:'):
                        vm = int(line.split()[1]) * 1024
            if vm < 0:
                return
            cur = vm + free
        old = resource.getrlimit(res)
        try:
            resource.setrlimit(res, (cur, old[1]))
        except (ValueError, OSError):
            return
        self.res, self.old = res, old

    def lift(self) -> None:
        if self.res is not None:
            resource.setrlimit(self.res, self.old)
            self.res = None

    def __enter__(self) -> 'Limited':
        spec = _limit_spec(self.when)
        if spec is None:
            return self
        if self.when == 'clean':
            self.lower(spec)
            return self
        from multiprocessing import shared_memory  # pylint: disable=import-outside-toplevel
        cls = shared_memory.SharedMemory
        original = cls.__init__
        limited = self

        def attach_limited(obj, name=None, create=False, size=0, *args, **kwargs):
            if create:
                return original(obj, name, create, size, *args, **kwargs)
            limited.lower(spec)
            try:
                return original(obj, name, create, size, *args, **kwargs)
            finally:
                limited.lift()

        cls.__init__ = attach_limited
        self.patched = (cls, original)
        return self

    def __exit__(self, *exc) -> None:
        self.lift()
        if self.patched is not None:
            cls, original = self.patched
            cls.__init__ = original
            self.patched = None


def list_present(root: str, prefix: int) -> list:
    """Names under the prefix right now: shm as "/name", lock files as full paths."""
    stem = f'{root}{prefix:06}_'
    present = []
    try:
        present += ['/' + n for n in sorted(os.listdir(SHM_DIR)) if n.startswith(stem)]
    except OSError:
        pass
    lock_dir = tempfile.gettempdir()
    try:
        present += [os.path.join(lock_dir, n) for n in sorted(os.listdir(lock_dir)) if n.startswith(stem)]
    except OSError:
        pass
    return present


def private_dev_shm() -> bool:
    """Is /dev/shm the harness's private tmpfs (mounted with source "shmstress")?"""
    found = None
    try:
        with open('/proc/self/mountinfo', encoding='utf-8', errors='replace') as f:
            for line in f:
                left, sep, right = line.partition(' - ')
                fields = left.split()
                if sep and len(fields) >= 5 and fields[4] == SHM_DIR:
                    found = right.split()
    except OSError:
        return False
    return bool(found) and len(found) >= 2 and found[0] == 'tmpfs' and found[1] == 'shmstress'


def shm_stat(name: str):
    """(dev, ino) of /dev/shm/<name without the leading "/">, or None."""
    try:
        st = os.stat(os.path.join(SHM_DIR, name.lstrip('/')))
    except OSError:
        return None
    return st.st_dev, st.st_ino


class UnlinkRecorder:
    """What a cleanup call removed that was not its own: clean's "removed".

    Streaming's clean_stale_shared_memory() probes each name by *creating* a 4-byte segment and
    unlinking it again; those probes never held anything and are not reported. While active, every
    exclusive create through ``_posixshmem.shm_open`` is remembered by inode, and every unlink
    (``_posixshmem.shm_unlink`` or ``os.unlink`` under /dev/shm) looks at the inode it is about to
    remove: one the call created itself is a probe, anything else is reported, including a segment
    another process created while the cleanup ran (the cleanup did remove it).
    """

    def __init__(self) -> None:
        self.removed = []
        self.probes = set()
        self._saved = []

    @staticmethod
    def _display(name: str) -> str:
        return name if name.startswith('/') else '/' + name

    def _record(self, shm_name: str, before) -> None:
        if before is None or before not in self.probes:
            self.removed.append(self._display(shm_name))

    def __enter__(self) -> 'UnlinkRecorder':
        try:
            import _posixshmem  # pylint: disable=import-outside-toplevel
        except ImportError:
            _posixshmem = None
        if _posixshmem is not None and hasattr(_posixshmem, 'shm_open') and hasattr(_posixshmem, 'shm_unlink'):
            original_open, original_unlink = _posixshmem.shm_open, _posixshmem.shm_unlink

            def shm_open(path, flags, *a, **kw):
                fd = original_open(path, flags, *a, **kw)
                if flags & os.O_CREAT and flags & os.O_EXCL:
                    st = os.fstat(fd)
                    self.probes.add((st.st_dev, st.st_ino))
                return fd

            def shm_unlink(name, *a, **kw):
                text = os.fsdecode(name)
                before = shm_stat(text)
                original_unlink(name, *a, **kw)
                self._record(text, before)

            self._saved += [(_posixshmem, 'shm_open', original_open), (_posixshmem, 'shm_unlink', original_unlink)]
            _posixshmem.shm_open, _posixshmem.shm_unlink = shm_open, shm_unlink
        original_os_unlink = os.unlink

        def unlink(path, *a, **kw):
            p = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
            under_shm = p.startswith(SHM_DIR + '/')
            before = shm_stat(p[len(SHM_DIR) + 1:]) if under_shm else None
            original_os_unlink(path, *a, **kw)
            if under_shm:
                self._record(p[len(SHM_DIR) + 1:], before)

        self._saved.append((os, 'unlink', original_os_unlink))
        os.unlink = unlink
        return self

    def __exit__(self, *exc) -> None:
        for module, attr, original in reversed(self._saved):
            setattr(module, attr, original)
        self._saved.clear()


# ---------------------------------------------------------------------------------------------
# The job's process group


def trial_dir() -> str:
    """Where this trial's scaffolding goes: the directory of the history file."""
    return os.path.dirname(os.environ.get('SHMSTRESS_EVENTS', ''))


def candidate_port(key: str, attempt: int) -> int:
    """The attempt-th loopback port rank 0 tries for the job `key` (trial dir + job key): fixed by the
    trial, so a replay tries the same ports; different trials and jobs start on different ones."""
    return PORT_BASE + zlib.crc32(f'{key}#{attempt}'.encode()) % PORT_SPAN


def _publish(path: str, text: str) -> None:
    tmp = f'{path}.tmp.{os.getpid()}'
    with open(tmp, 'w', encoding='ascii') as f:
        f.write(text)
    os.rename(tmp, path)  # readers see the whole port or nothing


def _rendezvous_error(what: str, exc: BaseException) -> GroupError:
    text = f'{what}: {type(exc).__name__}: {exc}'
    lowered = str(exc).lower()
    if 'timed out' in lowered or 'timeout' in lowered:
        return GroupError('timeout', text)
    if 'connection' in lowered or 'broken pipe' in lowered:
        return GroupError('broken', text)
    return GroupError('io', text)


class Group:
    """The job's process group, formed the way a launcher does before the dataset is built.

    - ``gloo``: torch.distributed's gloo backend. Rank 0 opens the job's TCPStore on a loopback
      port derived from the trial and job (``candidate_port``), moving to the next candidate on
      EADDRINUSE, and publishes the port it got in the trial directory (``pg.<job key>.port``);
      the other ranks read it from there, so concurrent trials never meet each other's store.
      The group's timeout is the acquire deadline.
    - ``emulated``: the stand-in's own group (``streaming.base.distributed.init_emulated_group``),
      for machines without torch: its barrier fails as gloo's does when a peer is gone.
    - ``nccl-like``: a group that, like NCCL, has no peer-death detection: a collective whose peer
      is gone does not fail at once as gloo's does, it waits until the group's timeout
      (``SHMSTRESS_NCCL_TIMEOUT_MS``, default torch 1.13's NCCL 30 min) and then fails ``timeout``
      (what NCCL_BLOCKING_WAIT=1 reports; without it NCCL just hangs). See ``_hold_peer_errors``.
    - ``none``: world size 1, or neither is available (documented limit).

    Every rank forms it when it starts, before its start jitter. Forming it can fail (a peer dead
    before it joined, or never arriving within the deadline): that fails the rank's first operation
    with ``broken``/``timeout``, as a launched rank would die in ``init_process_group`` — never a
    silent run without a group.
    """

    def __init__(self, subject, role: str) -> None:
        self.subject = subject
        self.rank = env_int('SHMSTRESS_RANK', env_int('RANK', 0))
        self.world = env_int('SHMSTRESS_WORLD_SIZE', env_int('WORLD_SIZE', 1))
        self.timeout_ms = max(env_int('SHMSTRESS_ACQUIRE_TIMEOUT_MS', 30000), 1)
        # How long a collective waits for its peers: the acquire deadline, except under nccl-like.
        self.collective_ms = self.timeout_ms
        self.transport = None  # nccl-like only: 'gloo' or 'emulated', what carries its collectives
        self.job_key = os.environ.get('SHMSTRESS_JOB_KEY', 'job')
        self.formed = False
        self.error = None
        self.port = None
        self.bad = False
        wanted = os.environ.get(GROUP_ENV, '') or 'auto'
        if os.environ.get('SHMSTRESS_STANDIN_PROCESS_GROUP') == 'file' and wanted == 'auto':
            wanted = 'emulated'  # the earlier name of the same switch
        if role == 'cleanup' or self.world <= 1:
            self.mode, self.reason = 'none', 'a single process: no process group needed'
        elif wanted not in GROUP_MODES:
            self.mode, self.reason = 'none', f'{GROUP_ENV}={wanted!r} is not one of {", ".join(GROUP_MODES)}'
            self.bad = True
        elif wanted == 'nccl-like':
            self._choose_nccl_like(subject)
        elif wanted == 'none':
            self.mode, self.reason = 'none', f'{GROUP_ENV}=none: ranks run without a process group'
        elif wanted in ('auto', 'gloo') and self._torch() is not None:
            self.mode = 'gloo'
            self.reason = (f'torch.distributed gloo group per job, loopback TCPStore, timeout {self.timeout_ms} ms '
                           f'(the acquire deadline)')
        elif wanted in ('auto', 'emulated') and subject.emulated_group is not None:
            self.mode = 'emulated'
            self.reason = (f'torch not importable: the stand-in\'s emulated group (fails like gloo on a dead peer), '
                           f'timeout {self.timeout_ms} ms')
        elif wanted in ('gloo', 'emulated'):
            # Asked for by name and not to be had: no launcher carries on without its group.
            what = 'torch.distributed (gloo) is not importable' if wanted == 'gloo' else \
                'this subject has no emulated group (only the stand-in has one)'
            self.mode, self.reason = 'none', f'{GROUP_ENV}={wanted}: {what}'
            self.bad = True
        else:
            self.mode = 'none'
            self.reason = (f'{GROUP_ENV}={wanted}: neither torch.distributed nor an emulated group is available; '
                           f'ranks run without a process group')

    def _choose_nccl_like(self, subject) -> None:
        """nccl-like: its timeout (checked here, at the boundary) and what carries its collectives.

        There is no NCCL without GPUs, so the group is built from one that runs here and the one thing
        NCCL does not do is taken away: noticing that a peer is gone. gloo (else, for the stand-in
        without torch, the emulated group) carries the rendezvous and the collectives, with the NCCL
        timeout as its own, so a peer that is alive but late is waited for as NCCL waits; a peer
        whose process is gone makes gloo fail at once ("Connection closed by peer"), and that error
        is held back until the collective's timeout has run (``_hold_peer_errors``). This rather
        than the emulated group without its death check because the real package calls
        ``torch.distributed.barrier()`` itself and knows no emulated group: built on gloo, the mode
        runs against the real code as well as the stand-in."""
        text = os.environ.get(NCCL_TIMEOUT_ENV, '')
        deadline = max(self.timeout_ms, env_int('SHMSTRESS_BARRIER_TIMEOUT_MS', 0))
        try:
            ms = int(text) if text != '' else NCCL_DEFAULT_TIMEOUT_MS
        except ValueError:
            ms = -1
        if ms < 2 * deadline:
            self.mode, self.bad = 'none', True
            self.reason = (f'{NCCL_TIMEOUT_ENV}={text!r} must be a number of ms at least twice the op deadline '
                           f'({deadline} ms, the longer of SHMSTRESS_ACQUIRE_TIMEOUT_MS and '
                           f'SHMSTRESS_BARRIER_TIMEOUT_MS): a collective that gives up within the deadline is '
                           f'what gloo does, not a hang')
            return
        self.collective_ms = ms
        if self._torch() is not None:
            self.transport = 'gloo'
        elif subject.emulated_group is not None:
            self.transport = 'emulated'
        else:
            self.mode, self.bad = 'none', True
            self.reason = (f'{GROUP_ENV}=nccl-like: torch.distributed (gloo) is not importable and this subject '
                           f'has no emulated group (only the stand-in has one)')
            return
        self.mode = 'nccl-like'
        self.reason = (f'nccl-like: {self.transport} carries the collectives, but a dead peer is not noticed: a '
                       f'collective waits {ms} ms ({NCCL_TIMEOUT_ENV}; NCCL\'s default is 1800000) and then '
                       f'fails timeout; rendezvous timeout {self.timeout_ms} ms (the acquire deadline)')

    def _hold_peer_errors(self, collective):
        """``collective`` as NCCL runs it: a peer that is gone makes it wait out its timeout.

        gloo's closed pair is a fact the transport learnt, not a wait: once it has failed, the
        collective can never complete (the peer's process is gone), which is the state a NCCL
        collective sits in until its watchdog's timeout. So the survivor waits from the collective's
        start until that timeout — no wake-up can end it early, as none ends NCCL's — and then fails
        as NCCL_BLOCKING_WAIT=1 makes NCCL fail: a timeout. Any other error passes through."""
        timeout_ms = self.collective_ms

        def held(*args, **kwargs):
            start = time.monotonic()
            try:
                return collective(*args, **kwargs)
            except RuntimeError as exc:
                if not peer_gone(str(exc)):
                    raise
            end = start + timeout_ms / 1000.0
            while time.monotonic() < end:
                time.sleep(max(end - time.monotonic(), 0.0))
            # The transport's own words stay out of the message: they would read as "broken".
            raise RuntimeError(f'[nccl-like] barrier: Timed out after {timeout_ms} ms: a peer of the job\'s group '
                               f'is gone, and NCCL, unlike gloo, does not notice; its collective waits for the '
                               f'timeout (Timeout(ms)={timeout_ms})')

        held.__wrapped__ = collective
        return held

    def _install_nccl_like(self) -> None:
        """Every dist.barrier() the job makes, Streaming's and ours, goes through _hold_peer_errors:
        the real package calls ``torch.distributed.barrier`` (looked up at each call), the stand-in
        ``streaming.base.distributed.barrier``, which reaches the former when torch's group is up."""
        if self.transport == 'gloo':
            dist = self._torch()
            held = self._hold_peer_errors(dist.barrier)
            for module in (dist, sys.modules.get('torch.distributed.distributed_c10d')):
                if module is not None and getattr(module, 'barrier', None) is held.__wrapped__:
                    module.barrier = held
        else:
            self.subject.distributed.barrier = self._hold_peer_errors(self.subject.distributed.barrier)

    @staticmethod
    def _torch():
        try:
            import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        except Exception:  # pylint: disable=broad-except
            return None
        return dist if dist.is_available() else None

    def form_or_record(self) -> None:
        """Form the group; a failure is kept for the rank's first operation to report."""
        try:
            self.form()
        except GroupError as exc:
            self.error = exc

    def form(self) -> None:
        """Form the group (blocks until every rank joined); raises GroupError."""
        if self.formed or self.mode == 'none':
            self.formed = True
            return
        where = trial_dir()
        if not where or not os.path.isdir(where):
            raise GroupError('io', f'no trial directory to meet in (SHMSTRESS_EVENTS={os.environ.get("SHMSTRESS_EVENTS")!r})')
        if self.mode == 'emulated' or self.transport == 'emulated':
            try:
                self.subject.emulated_group(where, self.job_key, self.rank, self.world, self.timeout_ms / 1000.0,
                                            barrier_timeout_s=self.collective_ms / 1000.0)
            except RuntimeError as exc:
                raise _rendezvous_error('emulated process group', exc) from exc
        else:
            self._form_gloo(where)
        if self.mode == 'nccl-like':
            self._install_nccl_like()
        self.formed = True

    def _form_gloo(self, where: str) -> None:
        import datetime  # pylint: disable=import-outside-toplevel
        dist = self._torch()
        os.environ.setdefault('GLOO_SOCKET_IFNAME', 'lo')  # gloo's own pair sockets stay on loopback
        timeout = datetime.timedelta(milliseconds=self.timeout_ms)
        collective_timeout = datetime.timedelta(milliseconds=self.collective_ms)
        deadline = time.monotonic() + self.timeout_ms / 1000.0
        port_file = os.path.join(where, f'pg.{self.job_key}.port')
        key = f'{where}/{self.job_key}'
        if self.rank == 0:
            store = None
            tried = []
            for attempt in range(PORT_ATTEMPTS):
                port = candidate_port(key, attempt)
                try:
                    store = dist.TCPStore('127.0.0.1', port, self.world, True, timeout, wait_for_workers=False)
                except (RuntimeError, TimeoutError) as exc:  # c10d raises TimeoutError for a deadline < 1 s
                    if 'Address already in use' in str(exc) or 'errno: 98' in str(exc):
                        tried.append(port)
                        continue
                    raise _rendezvous_error(f'TCPStore on 127.0.0.1:{port}', exc) from exc
                break
            if store is None:
                raise GroupError('exhausted', f'no free loopback port for the job\'s TCPStore: {tried} all in use')
            self.port = port
            try:
                _publish(port_file, str(port))
            except OSError as exc:
                raise GroupError('io', f'cannot publish the rendezvous port in {where}: {exc}') from exc
        else:
            port = None
            while port is None:
                try:
                    with open(port_file, encoding='ascii') as f:
                        port = int(f.read())
                except (OSError, ValueError):
                    if time.monotonic() >= deadline:
                        raise GroupError('timeout', f'rank 0 did not publish the job\'s rendezvous port within '
                                                    f'{self.timeout_ms} ms (dead or not started)') from None
                    time.sleep(0.005)
            self.port = port
            left = datetime.timedelta(seconds=max(deadline - time.monotonic(), 0.05))
            try:
                store = dist.TCPStore('127.0.0.1', port, self.world, False, left)
            except (RuntimeError, TimeoutError) as exc:
                raise _rendezvous_error(f'TCPStore client of 127.0.0.1:{port}', exc) from exc
        if self.collective_ms != self.timeout_ms:
            # init_process_group waits for every rank with the collectives' timeout (NCCL's, under
            # nccl-like): meet first within the acquire deadline, so a rank that never joins fails the
            # rank's first op, as under gloo, instead of stalling before the start gate.
            self._meet_on_store(store, port, deadline)
        try:
            dist.init_process_group('gloo', store=store, rank=self.rank, world_size=self.world,
                                    timeout=collective_timeout)
        except RuntimeError as exc:
            raise _rendezvous_error(f'init_process_group (gloo, port {port})', exc) from exc

    def _meet_on_store(self, store, port: int, deadline: float) -> None:
        """Every rank of the job counted on the job's TCPStore before `deadline`, else GroupError."""
        key = 'shmstress/joined'
        try:
            joined = store.add(key, 1)
            while joined < self.world:
                if time.monotonic() >= deadline:
                    raise GroupError('timeout', f'only {joined} of {self.world} ranks joined the job\'s group on '
                                                f'127.0.0.1:{port} within {self.timeout_ms} ms')
                time.sleep(0.005)
                joined = store.add(key, 0)
        except (RuntimeError, TimeoutError) as exc:
            raise _rendezvous_error(f'rendezvous on 127.0.0.1:{port}', exc) from exc

    def barrier(self) -> None:
        """The job's dist.barrier(), through the package's own helper."""
        self.subject.dist_barrier()


# ---------------------------------------------------------------------------------------------
# The worker


class Subject:
    """The imported package's entry points."""

    def __init__(self) -> None:
        import streaming  # pylint: disable=import-outside-toplevel
        from streaming.base.shared.barrier import SharedBarrier  # pylint: disable=import-outside-toplevel
        from streaming.base.shared.memory import SharedMemory  # pylint: disable=import-outside-toplevel
        from streaming.base.shared.prefix import get_shm_prefix  # pylint: disable=import-outside-toplevel
        from streaming.base.util import clean_stale_shared_memory  # pylint: disable=import-outside-toplevel
        from streaming.base.world import World  # pylint: disable=import-outside-toplevel
        try:
            from streaming.base import distributed  # pylint: disable=import-outside-toplevel
        except ImportError:
            distributed = None
        self.module = streaming
        self.World = World
        self.get_shm_prefix = get_shm_prefix
        self.SharedBarrier = SharedBarrier
        self.SharedMemory = SharedMemory
        self.clean_stale_shared_memory = clean_stale_shared_memory
        self.distributed = distributed
        self.standin = bool(getattr(streaming, '__shmstress_standin__', False))
        # Stand-in only: its process group for machines without torch.
        self.emulated_group = getattr(distributed, 'init_emulated_group', None) if self.standin else None
        # The real package uses fixed names; the stand-in prefixes $SHMSTRESS_ROOT.
        root_env = getattr(streaming, 'SHMSTRESS_NAME_ROOT_ENV', None) if self.standin else None
        self.root = os.environ.get(root_env, '') if root_env else ''
        self.version = str(getattr(streaming, '__version__', 'unknown'))
        self.path = os.path.dirname(os.path.abspath(getattr(streaming, '__file__', '') or ''))

    def dist_barrier(self) -> None:
        if self.distributed is not None and hasattr(self.distributed, 'barrier'):
            self.distributed.barrier()
            return
        try:
            import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        except Exception:  # pylint: disable=broad-except
            return
        if dist.is_available() and dist.is_initialized():
            dist.barrier()


class Dataset:
    """One StreamingDataset of this rank: its index among the rank's datasets, its prefix, its handle on
    ``{prefix:06}_locals`` and the segments its local leader created (for witnesses). With several
    datasets in the rank, each of its ops says which (``args.dataset``), as the native worker's do."""

    def __init__(self, index: int, count: int) -> None:
        self.index = index
        self.count = count
        self.world = None
        self.prefix = None
        self.shm = None
        self.created = []  # (name, dev, ino) of ok segment ops, in order

    def args(self, args: dict) -> dict:
        if self.count > 1:
            args['dataset'] = self.index
        return args


class Rank:
    """One worker's run: its identity, its group, and the handles of what it created."""

    def __init__(self, w: Worker, subject: Subject, group: Group) -> None:
        self.w = w
        self.subject = subject
        self.group = group
        self.handles = []  # kept alive: the package's exit handlers own them
        # A dataset was constructed and its constructor's closing dist.barrier() is still to come: the
        # rank's next step (a clean between, the next dataset's acquire) meets the group first.
        self.constructor_barrier_due = False

    def end_construction(self) -> None:
        """StreamingDataset.__init__ ends with the job's dist.barrier(): no rank goes on to the script's
        next step before every rank finished constructing (a non-leader's attach of the locals)."""
        if self.constructor_barrier_due:
            self.constructor_barrier_due = False
            self.group.barrier()

    def begin(self, name: str, args: dict = None):
        """invoke `name`; if the job's process group could not be formed, the rank's first op fails
        with that error (and nothing runs): a launched rank dies in init_process_group."""
        op = Op(self.w, name, args)
        if self.group.error is not None:
            op.fail(self.group.error)
            return None
        return op

    def clean(self) -> bool:
        op = self.begin('clean')
        if op is None:
            return False
        try:
            self.end_construction()
        except Exception as exc:  # pylint: disable=broad-except
            op.fail(exc)
            return False
        with UnlinkRecorder() as rec:
            try:
                with Limited('clean'):
                    self.subject.clean_stale_shared_memory()
            except Exception as exc:  # pylint: disable=broad-except
                failed = exc
            else:
                failed = None
        if failed is not None:
            extra = {'value': {'removed': rec.removed, 'kept': [], 'skipped': []}} if rec.removed else {}
            op.fail(failed, **extra)
            return False
        op.ok({'removed': rec.removed, 'kept': [], 'skipped': []})
        return True

    def witness(self, ds: 'Dataset', when: str) -> None:
        """What stat(2) shows now for every segment this rank created for the dataset
        (docs/worker-protocol.md)."""
        if not ds.created:
            return
        op = Op(self.w, 'witness', ds.args({'when': when}))
        seen = []
        for name, _, _ in ds.created:
            try:
                st = os.stat(os.path.join(SHM_DIR, name.lstrip('/')))
            except FileNotFoundError:
                seen.append({'name': name, 'missing': True})
            except OSError as exc:
                seen.append({'name': name, 'error': f'{errno.errorcode.get(exc.errno, "E?")}: {exc.strerror}'})
            else:
                seen.append({'name': name, 'dev': st.st_dev, 'ino': st.st_ino})
        op.ok({'segments': seen})


# Settings a fault gives one rank: a launcher starts every rank with one environment, so a rank it
# started finds its own under its LOCAL_RANK; a rank the agent restarted never met the fault.
FAULT_KNOBS = ('SHMCOORD_CRASH_AT', 'SHMCOORD_PAUSE_AT', 'SHMSTRESS_FIU_ENABLE', 'SHMSTRESS_START_DELAY_MS',
               'SHMSTRESS_ATTACH_DELAY_MS', 'SHMSTRESS_LIMIT_AT', 'SHMSTRESS_BARRIER_PROCS')


def apply_rank_env() -> bool:
    text = os.environ.get('SHMSTRESS_RANK_ENV', '')
    if not text:
        return True
    try:
        mine = json.loads(text)[os.environ['LOCAL_RANK']]
    except (ValueError, KeyError, TypeError):
        return False
    if not isinstance(mine, dict):
        return False
    restarted = env_int('TORCHELASTIC_RESTART_COUNT', 0) > 0
    for key, value in mine.items():
        if isinstance(value, str) and not (restarted and key in FAULT_KNOBS):
            os.environ[key] = value
    return True


def wait_at_gate(w: Worker) -> None:
    """Aligned start (protocol v2): ``ready`` once imported and set up, then block until the
    supervisor opens the trial's start gate, a FIFO whose only writer it closes."""
    w.emit('ready')
    path = os.environ.get('SHMSTRESS_GATE', '')
    if not path:
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.set_blocking(fd, True)
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


class LoaderDataset:
    """The part of ``StreamingDataset`` its DataLoader workers run: each worker enters the job's
    SharedBarrier once per round where ``_get_work`` does, with ``num_procs`` =
    ``World.detect().workers_per_node`` (ranks x workers). With ``fork`` the workers use the barrier
    the rank built (inherited); with ``spawn`` the dataset is pickled and each worker unpickles the
    rank's barrier as the real one does: ``StreamingDataset.__getstate__`` drops the barrier's lock
    (unpicklable), ``SharedBarrier`` has no pickling of its own, so CPython's
    ``SharedMemory.__reduce__`` rebuilds its segment as an *attach by name* (no reset; gone:
    ``FileNotFoundError``; reused: another job's barrier), and the worker re-creates the lock from
    ``filelock_path`` before its first round. The unpickling happens inside the worker's
    ``barrier_attach`` op (the real worker unpickles when it starts, just before)."""

    def __init__(self, barrier, lock_path: str, name: str, rounds: int, ops: dict) -> None:
        self.barrier = barrier
        self.lock_path = lock_path
        self.name = name
        self.rounds = rounds
        self.ops = ops
        self.pickled_barrier = None
        self.lock_class = None

    def __getstate__(self):
        state = dict(self.__dict__)
        barrier = state['barrier']
        state['barrier'] = None
        if barrier is not None:
            lock = barrier.lock
            del barrier.lock
            try:
                state['pickled_barrier'] = pickle.dumps(barrier)
            finally:
                barrier.lock = lock
            state['lock_class'] = type(lock)
        return state

    def _unpickled_barrier(self):
        barrier = pickle.loads(self.pickled_barrier)  # attaches its segment by name
        barrier.lock = self.lock_class(barrier.filelock_path)
        return barrier

    def __iter__(self):
        import torch.utils.data  # pylint: disable=import-outside-toplevel
        info = torch.utils.data.get_worker_info()
        w = Worker(EventLog.from_env(inherited_fd=self.pickled_barrier is None))
        w.worker = info.id if info is not None else 0
        w.announce('loader')
        try:
            yield from self._rounds(w, info)
        except KeyboardInterrupt as exc:
            # Ctrl-C reaches the loader workers too; torch's worker loop swallows KeyboardInterrupt and
            # the worker exits 0, so the op it cut off is reported here (`interrupted`).
            if w.open_op is not None:
                w.open_op.fail(exc)
            raise

    def _rounds(self, w: 'Worker', info):
        subject = Subject()
        rng = random.Random(env_int('SHMSTRESS_SEED', 1) ^ (0x9e3779b97f4a7c15 * (w.worker + 1)))
        world = subject.World.detect()
        procs = env_int('SHMSTRESS_BARRIER_PROCS', 0)
        num_procs = procs * (info.num_workers if info is not None else 1) if procs > 0 else world.workers_per_node
        op = Op(w, 'barrier_attach', {'num_procs': num_procs})
        try:
            with Limited('attach'):
                if self.barrier is not None:  # fork: the rank's own object
                    barrier = self.barrier
                elif self.pickled_barrier is not None:  # spawn: unpickled, attached by name
                    barrier = self._unpickled_barrier()
                else:
                    barrier = subject.SharedBarrier(self.lock_path, self.name)
        except Exception as exc:  # pylint: disable=broad-except
            op.fail(exc)
            raise
        # A copy (inherited or unpickled) never created the segment, whatever its creator's flags say.
        op.ok(dict(barrier_identity(barrier), created=False) if barrier_identity(barrier) else {})
        for k in range(self.rounds):
            sleep_range(rng, self.ops.get('round_jitter_ms'))
            op = Op(w, 'barrier', {'round': k})
            try:
                barrier(num_procs)
            except Exception as exc:  # pylint: disable=broad-except
                op.fail(exc)
                raise
            op.ok({'round': k})
            yield k
        Op(w, 'barrier_detach').ok()  # Streaming has nothing to detach


def __getattr__(name: str):
    """``LoaderIterable``: LoaderDataset as a torch IterableDataset, built on first use so that a rank
    without loader workers never imports torch for it; a module attribute, so that a spawned worker
    unpickles it by name."""
    if name != 'LoaderIterable':
        raise AttributeError(name)
    import torch.utils.data  # pylint: disable=import-outside-toplevel
    cls = type('LoaderIterable', (LoaderDataset, torch.utils.data.IterableDataset), {'__module__': __name__})
    globals()['LoaderIterable'] = cls
    return cls


def iterate_loader(w: Worker, subject: 'Subject', group: 'Group', lock_path: str, name: str, rounds: int,
                   ops: dict) -> bool:
    """What a rank does with loader workers: StreamingDataset.__init__ builds the SharedBarrier and ends
    with the job's dist.barrier(); then iteration begins: a real ``torch.utils.data.DataLoader``
    starts ``workers`` processes (``fork`` or ``spawn``) that enter the barrier, and the rank consumes
    what they yield. A dead or failed worker makes the DataLoader raise in the rank, as for users."""
    loader = ops.get('loader') or {}
    workers = int(loader.get('workers', 0) or 0)
    start = str(loader.get('start', 'fork'))
    op = Op(w, 'iterate', {'workers': workers, 'start': start})
    try:
        barrier = subject.SharedBarrier(lock_path, name)
        group.barrier()
        import torch.utils.data  # pylint: disable=import-outside-toplevel
        dataset = sys.modules[__name__].LoaderIterable(barrier, lock_path, name, rounds, ops)
        dataloader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers,
                                                 multiprocessing_context=start)
        for _ in dataloader:
            pass
    except Exception as exc:  # pylint: disable=broad-except
        op.fail(exc)
        return False
    op.ok()
    return True


def run_cleanup_role(w: Worker, subject: Subject, group: Group) -> int:
    # The trial's cleanup step is one process, whatever the launcher's variables say.
    os.environ['WORLD_SIZE'], os.environ['RANK'], os.environ['LOCAL_RANK'] = '1', '0', '0'
    return EXIT_OK if Rank(w, subject, group).clean() else EXIT_FAILED


def run(argv) -> int:
    if len(argv) != 2 or argv[1] != 'worker':
        sys.stderr.write('usage: adapter.py worker   (started by shmstress with the trial environment)\n')
        return EXIT_BAD_ENV
    # SIGTERM simply kills us, as it kills a trainer: no exit handlers. SIGINT is a terminal's
    # Ctrl-C (the `interrupt` fault): Python's own KeyboardInterrupt, raised wherever the rank is,
    # unwinds past every `except Exception` here, then the interpreter runs the package's atexit
    # handlers and dies of SIGINT, as a trainer does at a terminal (also when a parent left SIGINT
    # ignored: a trainer at a terminal never has it ignored).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    log = EventLog.from_env()
    if not log.ok():
        sys.stderr.write('adapter.py: no event log (SHMSTRESS_EVENTS_FD / SHMSTRESS_EVENTS)\n')
        return EXIT_BAD_ENV
    if not apply_rank_env():
        sys.stderr.write('adapter.py: SHMSTRESS_RANK_ENV has no settings for this LOCAL_RANK\n')
        return EXIT_BAD_ENV
    w = Worker(log)
    role = os.environ.get('SHMSTRESS_ROLE', 'rank')
    if role != 'cleanup':
        w.announce('rank')

    ops, dirs = {}, []
    if role != 'cleanup':
        try:
            ops = json.loads(os.environ.get('SHMSTRESS_OPS', '') or '{}')
            dirs = json.loads(os.environ.get('SHMSTRESS_DIRS', '') or '[]')
            if not isinstance(ops, dict) or not isinstance(dirs, list):
                raise ValueError('SHMSTRESS_OPS must be an object and SHMSTRESS_DIRS an array')
        except ValueError as exc:
            sys.stderr.write(f'adapter.py: bad environment: {exc}\n')
            return EXIT_BAD_ENV

    extra_path = os.environ.get('SHMSTRESS_STREAMING_PATH', '')
    for entry in reversed([p for p in extra_path.split(os.pathsep) if p]):
        sys.path.insert(0, os.path.abspath(entry))
    try:
        subject = Subject()
    except Exception as exc:  # pylint: disable=broad-except
        where = f'SHMSTRESS_STREAMING_PATH={extra_path!r}' if extra_path else 'SHMSTRESS_STREAMING_PATH not set'
        w.emit('subject', available=False,
               reason=f'cannot import streaming ({type(exc).__name__}: {exc}); {where}; python {sys.executable}')
        return EXIT_UNAVAILABLE
    if not subject.standin and not private_dev_shm() and os.environ.get('SHMSTRESS_ALLOW_SHARED_SHM') != '1':
        # The real package uses fixed names (/000000_locals ...) and its cleanup deletes every one of
        # them: outside the harness's private /dev/shm that would hit the machine's real jobs.
        w.emit('subject', available=False, standin=False, path=subject.path,
               reason='the real streaming package uses fixed shm names and /dev/shm is not a private '
                      'shmstress mount (set SHMSTRESS_ALLOW_SHARED_SHM=1 to run anyway)')
        return EXIT_UNAVAILABLE
    group = Group(subject, role)
    if group.bad:
        sys.stderr.write(f'adapter.py: bad environment: {group.reason}\n')
        return EXIT_BAD_ENV
    w.emit('subject', available=True, protocol=2, distributed=group.mode, reason=group.reason, name='streaming',
           version=subject.version, path=subject.path, standin=subject.standin, root=subject.root,
           variant=os.environ.get('SHMSTRESS_STANDIN_VARIANT', '') if subject.standin else '')

    if role == 'cleanup':
        return run_cleanup_role(w, subject, group)

    # A launcher's rank forms the job's process group first thing; what the script does before it
    # builds its dataset (reading the index, ...) takes each rank its own time: the start jitter.
    group.form_or_record()
    # Imported and set up: from here on every rank of the trial starts at one moment (the gate),
    # as ranks forked after import and released together do (#884's reporter).
    wait_at_gate(w)
    rng = random.Random(env_int('SHMSTRESS_SEED', 1))
    sleep_range(rng, ops.get('start_jitter_ms'))
    late = env_int('SHMSTRESS_START_DELAY_MS', 0)  # a late joiner
    if late > 0:
        time.sleep(late / 1000.0)

    me = Rank(w, subject, group)
    all_ok = True
    if ops.get('clean_before', False):
        all_ok &= me.clean()

    streams_local = [str(d.get('path', '')) if isinstance(d, dict) else str(d) for d in dirs]
    streams_remote = [REMOTE_SCHEME + str(d.get('path', '')) if isinstance(d, dict) and d.get('remote') else None
                      for d in dirs]
    root = subject.root
    kinds = [str(k) for k in ops.get('segments', []) or []]
    # Several datasets in one rank (train and val of one script, `datasets` = N): each is constructed in
    # turn, as StreamingDataset.__init__ runs: get_shm_prefix registers its own locals, then its local
    # leader creates its segments. With clean_between the user's clean_stale_shared_memory() runs
    # after the first one's construction, while it is live (#767's reporter). The epochs come after
    # every construction, as training begins once the loaders exist.
    count = max(1, int(ops.get('datasets', 1) or 1))
    built = []
    for index in range(count):
        if not (all_ok and ops.get('acquire', True)):
            break
        ds = Dataset(index, count)
        if not acquire_prefix(me, ds, streams_local, streams_remote):
            all_ok = False
            break
        built.append(ds)
        if ds.world.is_local_leader:
            all_ok &= make_segments(me, ds, root, [k for k in kinds if k not in EPOCH_SEGMENTS], stop=False)
        me.constructor_barrier_due = all_ok
        if all_ok and index == 0 and count > 1 and ops.get('clean_between', False):
            all_ok &= me.clean()
    # The last constructor's closing dist.barrier() is barrier_attach's (below), as with one dataset.
    me.constructor_barrier_due = False
    # The epoch: _share_work creates the epoch's shape and data segments (without an exit handler), in
    # each dataset's prefix, dataset after dataset; the first that fails raises out of the epoch.
    for ds in built:
        if not all_ok or not ds.world.is_local_leader:
            break
        all_ok &= make_segments(me, ds, root, [k for k in kinds if k in EPOCH_SEGMENTS], stop=True)

    first = built[0] if built else None
    rounds = int(ops.get('rounds', 0) or 0)
    loader_workers = int((ops.get('loader') or {}).get('workers', 0) or 0)
    if first is not None and all_ok and rounds > 0 and loader_workers > 0:
        lock_path = os.path.join(tempfile.gettempdir(), f'{root}{first.prefix:06}_barrier_filelock')
        all_ok &= iterate_loader(w, subject, group, lock_path, f'{first.prefix:06}_barrier', rounds, ops)
    elif first is not None and all_ok and rounds > 0:
        # Streaming counts the processes of a node itself; a scenario may override the count.
        num_procs = env_int('SHMSTRESS_BARRIER_PROCS', first.world.workers_per_node)
        late = env_int('SHMSTRESS_ATTACH_DELAY_MS', 0)  # an injected late constructor
        barrier = None
        args = {'num_procs': num_procs}
        if late > 0:
            args['late_ms'] = late
        op = Op(w, 'barrier_attach', args)
        try:
            lock_path = os.path.join(tempfile.gettempdir(), f'{root}{first.prefix:06}_barrier_filelock')
            with Limited('attach'):
                barrier = subject.SharedBarrier(lock_path, f'{first.prefix:06}_barrier')
            # StreamingDataset.__init__ ends with the job's dist.barrier(): nobody uses the
            # barrier before every rank has constructed it.
            group.barrier()
            if late > 0:
                # The injected fault: a second constructor with the same names, `late` ms after the
                # job started using the barrier (its counters are reset under the others' feet).
                time.sleep(late / 1000.0)
                barrier = subject.SharedBarrier(lock_path, f'{first.prefix:06}_barrier')
        except Exception as exc:  # pylint: disable=broad-except
            op.fail(exc)
            all_ok = False
            barrier = None
        else:
            op.ok(barrier_identity(barrier))
        k = 0
        while barrier is not None and all_ok and k < rounds:
            sleep_range(rng, ops.get('round_jitter_ms'))
            op = Op(w, 'barrier', {'round': k})
            try:
                barrier(num_procs)  # no timeout: a broken round hangs here, as in Streaming
            except Exception as exc:  # pylint: disable=broad-except
                op.fail(exc)
                all_ok = False
            else:
                op.ok({'round': k})
            k += 1
        if barrier is not None:
            Op(w, 'barrier_detach').ok()  # Streaming has nothing to detach

    # Released last-constructed first, `hold` before each: the first dataset outlives the others.
    for ds in reversed(built):
        sleep_range(rng, ops.get('hold_ms'))
        released = False
        if ops.get('release', True):
            me.witness(ds, 'release')
            op = Op(w, 'release', ds.args({'prefix': ds.prefix}))
            try:
                release_locals(ds.shm)
            except Exception as exc:  # pylint: disable=broad-except
                op.fail(exc)
                all_ok = False
            else:
                op.ok()
                released = True
        if not released:
            me.witness(ds, 'end')
    if ops.get('clean_after', False):
        all_ok &= me.clean()
    return EXIT_OK if all_ok else EXIT_FAILED


def acquire_prefix(me: Rank, ds: Dataset, streams_local: list, streams_remote: list) -> bool:
    """The dataset's get_shm_prefix, as its constructor calls it: an ``acquire`` op."""
    op = me.begin('acquire', ds.args({'local_world_size': env_int('SHMSTRESS_LOCAL_WORLD_SIZE', 0)}))
    if op is None:
        return False
    try:
        me.end_construction()
        ds.world = me.subject.World.detect()
        with Limited('acquire'):
            ds.prefix, ds.shm = me.subject.get_shm_prefix(streams_local, streams_remote, ds.world)
    except Exception as exc:  # pylint: disable=broad-except
        op.fail(exc)
        return False
    op.ok({'prefix': ds.prefix, 'present': list_present(me.subject.root, ds.prefix)})
    me.w.emit('fds', count=count_fds())
    return True


def make_segments(me: Rank, ds: Dataset, root: str, kinds: list, stop: bool) -> bool:
    """The local leader's segments of one dataset, as StreamingDataset makes them: exclusive create
    through the package's SharedMemory (so CPython's resource tracker knows them), with the exit handler
    except for the epoch's shape/data, which _share_work creates without one. ``stop``: the first
    failure ends the step (an exception out of _share_work)."""
    all_ok = True
    for kind in kinds:
        name = f'/{root}{ds.prefix:06}_{kind}'
        op = Op(me.w, 'segment', ds.args({'name': name}))
        try:
            seg = me.subject.SharedMemory(f'{ds.prefix:06}_{kind}', True, 4096,
                                          auto_cleanup=kind not in EPOCH_SEGMENTS)
            st = os.fstat(seg.shm._fd)  # pylint: disable=protected-access
        except Exception as exc:  # pylint: disable=broad-except
            op.fail(exc)
            all_ok = False
            if stop:
                break
        else:
            me.handles.append(seg)
            ds.created.append((name, st.st_dev, st.st_ino))
            op.ok({'name': name, 'dev': st.st_dev, 'ino': st.st_ino})
    return all_ok


def barrier_identity(barrier) -> dict:
    """What barrier_attach reports: whether this process's constructor *created* the segment (its
    create-or-attach won), its lock file, and the segment's (dev, ino), as the package's SharedMemory
    holds them. The creator's resource tracker unlinks the name if the creator dies alone (F6); ranks
    of one barrier with different lock files have no mutual exclusion (F21): evidence names both.
    Read from the stand-in's ``created`` or the real package's ``created_shms``; {} if neither."""
    shm = getattr(getattr(barrier, '_arr', None), 'shm', None)
    if shm is None:
        return {}
    if isinstance(getattr(shm, 'created', None), bool):
        created = shm.created
    elif isinstance(getattr(shm, 'created_shms', None), list):
        created = bool(shm.created_shms)
    else:
        return {}
    value = {'created': created}
    lock = getattr(barrier, 'filelock_path', None)  # its mutual exclusion: a lock file in gettempdir() (F21)
    if isinstance(lock, str):
        value['lock'] = lock
    fd = getattr(getattr(shm, 'shm', None), '_fd', -1)  # CPython's SharedMemory under both
    try:
        st = os.fstat(fd)
    except (OSError, TypeError):
        return value
    value.update({'dev': st.st_dev, 'ino': st.st_ino})
    return value


def release_locals(shm) -> None:
    """What StreamingDataset.__del__ does: mark our locals record released (length 0). The segment
    itself goes when its creator's exit handler unlinks it."""
    shm.buf[:4] = b'\0\0\0\0'


def main() -> int:
    try:
        return run(sys.argv)
    except Exception:  # pylint: disable=broad-except
        sys.stderr.write('adapter.py: uncaught exception\n' + traceback.format_exc())
        return EXIT_BUG


if __name__ == '__main__':
    sys.exit(main())
