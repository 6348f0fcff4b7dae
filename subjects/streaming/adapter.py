#!/usr/bin/python3
"""shmstress subject adapter for MosaicML Streaming (worker protocol v1, docs/worker-protocol.md).

Run by the harness as ``/usr/bin/python3 subjects/streaming/adapter.py worker`` with the trial's
environment. It drives Streaming's public API only:

- ``streaming.base.world.World.detect()``
- ``streaming.base.shared.prefix.get_shm_prefix(locals, remotes, world)``
- ``streaming.base.shared.barrier.SharedBarrier(f"{tmpdir}/{prefix:06}_barrier_filelock",
  f"{prefix:06}_barrier")`` called as ``barrier(num_procs)``
- ``streaming.base.util.clean_stale_shared_memory()``

and writes the same events as the native worker (``harness/worker.cc``). See docs/streaming.md.

Exit codes: 0 every op succeeded, 1 an op failed (a ``fail`` event says which), 2 bad environment
(no event log, unparsable SHMSTRESS_OPS/SHMSTRESS_DIRS, bad argv), 3 the subject is not available
here (``streaming`` cannot be imported, or it would touch the machine's real names; a
``{"type": "subject", "available": false, "reason": ...}`` event says why), 70 a bug in this adapter.

Standard library only; it never imports torch itself (the real package does).
"""

import errno
import json
import os
import random
import signal
import sys
import tempfile
import time
import traceback
import zlib

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_ENV = 2
EXIT_UNAVAILABLE = 3
EXIT_BUG = 70

PIPE_BUF = 4096
SHM_DIR = '/dev/shm'
REMOTE_SCHEME = 'shmstress-remote://'  # any non-None remote: Streaming only checks "is not None"

DISTRIBUTED_REASON = 'torch.distributed not initialised: world size per job handled without a process group'
EMULATED_REASON = ('torch.distributed not initialised: the stand-in emulates its dist.barrier() with marker files '
                   '(SHMSTRESS_STANDIN_PROCESS_GROUP=file)')


def mono_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def env_int(key: str, default: int) -> int:
    value = os.environ.get(key, '')
    try:
        return int(value) if value != '' else default
    except ValueError:
        return default


# ---------------------------------------------------------------------------------------------
# Events


def _encode(event: dict) -> bytes:
    text = json.dumps(event, ensure_ascii=False, separators=(',', ':'))
    return (text + '\n').encode('utf-8', 'replace')  # lone surrogates (odd file names) -> '?'


def _fit(event: dict) -> bytes:
    """One line of at most PIPE_BUF bytes: long messages and lists are cut, marked "truncated"."""
    data = _encode(event)
    if len(data) <= PIPE_BUF:
        return data
    event = json.loads(json.dumps(event))  # a private deep copy
    error = event.get('error')
    if isinstance(error, dict) and isinstance(error.get('message'), str) and len(error['message']) > 1024:
        error['message'] = error['message'][:1024] + '... (truncated)'
        data = _encode(event)
    for key in ('value', 'args'):
        holder = event.get(key)
        while len(data) > PIPE_BUF and isinstance(holder, dict):
            lists = [k for k, v in holder.items() if isinstance(v, list) and v]
            if not lists:
                break
            longest = max(lists, key=lambda k: len(_encode({k: holder[k]})))
            holder[longest] = holder[longest][:len(holder[longest]) // 2]
            holder['truncated'] = True
            data = _encode(event)
    if len(data) > PIPE_BUF:
        for key in ('value', 'args'):
            if key in event:
                event[key] = {'truncated': True}
        if isinstance(error, dict):
            error['message'] = str(error.get('message', ''))[:256] + '... (truncated)'
        data = _encode(event)
    if len(data) > PIPE_BUF:  # still too long: keep only what identifies the event
        keep = ('t', 'type', 'pid', 'job', 'rank', 'local_rank', 'op', 'id')
        event = {k: event[k] for k in keep if k in event}
        event['truncated'] = True
        data = _encode(event)
    return data


class EventLog:
    """The trial's history file, appended one whole line per write(2)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def from_env(cls) -> 'EventLog':
        fd = env_int('SHMSTRESS_EVENTS_FD', -1)
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
            os.write(self.fd, _fit(event))
        except OSError:
            pass  # nowhere left to report it


class Worker:
    """Identity of this worker and its event sequence."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.job = env_int('SHMSTRESS_JOB', -1)
        self.rank = env_int('SHMSTRESS_RANK', -1)
        self.local_rank = env_int('SHMSTRESS_LOCAL_RANK', self.rank)
        self.next_id = 0

    def emit(self, type_: str, **fields) -> None:
        event = {'t': mono_ns(), 'type': type_, 'pid': os.getpid(), 'job': self.job, 'rank': self.rank,
                 'local_rank': self.local_rank}
        event.update(fields)
        self.log.emit(event)


def classify(exc: BaseException) -> dict:
    """A Python exception as a protocol error ``{code, message, errno}``."""
    text = str(exc)
    message = f'{type(exc).__name__}: {text}' if text else type(exc).__name__
    err = exc.errno if isinstance(exc, OSError) and isinstance(exc.errno, int) else 0
    if 'Reused local directory' in text:
        code = 'in-use'
    elif 'does not match' in text or 'not registered' in text:
        code = 'mismatch'
    elif isinstance(exc, ValueError) and 'empty file' in text:
        code = 'corrupt'
    elif isinstance(exc, FileExistsError):
        code = 'exists'
    elif isinstance(exc, PermissionError):
        code = 'permission'
    elif isinstance(exc, FileNotFoundError):
        code = 'not-found'
    elif isinstance(exc, OSError) and err in (errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.ENOMEM):
        code = 'exhausted'
    else:
        code = 'io'
    return {'code': code, 'message': message, 'errno': err}


class Op:
    """invoke now; ok(value) or fail(exception) later."""

    def __init__(self, worker: Worker, name: str, args: dict = None) -> None:
        self.worker = worker
        self.name = name
        worker.next_id += 1
        self.id = worker.next_id
        worker.emit('invoke', op=name, id=self.id, args=args if args is not None else {})

    def ok(self, value: dict = None) -> None:
        self.worker.emit('ok', op=self.name, id=self.id, value=value if value is not None else {})

    def fail(self, exc: BaseException, **extra) -> None:
        self.worker.emit('fail', op=self.name, id=self.id, error=classify(exc), **extra)


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


class UnlinkRecorder:
    """Records every name unlinked (shm_unlink or os.unlink) while active: clean's "removed"."""

    def __init__(self) -> None:
        self.removed = []
        self._saved = []

    @staticmethod
    def _shm_display(name: str) -> str:
        return name if name.startswith('/') else '/' + name

    def __enter__(self) -> 'UnlinkRecorder':
        try:
            import _posixshmem  # pylint: disable=import-outside-toplevel
        except ImportError:
            _posixshmem = None
        if _posixshmem is not None and hasattr(_posixshmem, 'shm_unlink'):
            original = _posixshmem.shm_unlink

            def shm_unlink(name, *a, **kw):
                original(name, *a, **kw)
                self.removed.append(self._shm_display(os.fsdecode(name)))

            self._saved.append((_posixshmem, 'shm_unlink', original))
            _posixshmem.shm_unlink = shm_unlink
        original_unlink = os.unlink

        def unlink(path, *a, **kw):
            original_unlink(path, *a, **kw)
            p = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
            self.removed.append('/' + p[len(SHM_DIR) + 1:] if p.startswith(SHM_DIR + '/') else p)

        self._saved.append((os, 'unlink', original_unlink))
        os.unlink = unlink
        return self

    def __exit__(self, *exc) -> None:
        for module, attr, original in reversed(self._saved):
            setattr(module, attr, original)
        self._saved.clear()


# ---------------------------------------------------------------------------------------------
# The worker


class Subject:
    """The imported package's entry points."""

    def __init__(self) -> None:
        import streaming  # pylint: disable=import-outside-toplevel
        from streaming.base.shared.barrier import SharedBarrier  # pylint: disable=import-outside-toplevel
        from streaming.base.shared.prefix import get_shm_prefix  # pylint: disable=import-outside-toplevel
        from streaming.base.util import clean_stale_shared_memory  # pylint: disable=import-outside-toplevel
        from streaming.base.world import World  # pylint: disable=import-outside-toplevel
        self.module = streaming
        self.World = World
        self.get_shm_prefix = get_shm_prefix
        self.SharedBarrier = SharedBarrier
        self.clean_stale_shared_memory = clean_stale_shared_memory
        self.standin = bool(getattr(streaming, '__shmstress_standin__', False))
        # The real package uses fixed names; the stand-in prefixes $SHMSTRESS_ROOT.
        root_env = getattr(streaming, 'SHMSTRESS_NAME_ROOT_ENV', None) if self.standin else None
        self.root = os.environ.get(root_env, '') if root_env else ''
        self.version = str(getattr(streaming, '__version__', 'unknown'))
        self.path = os.path.dirname(os.path.abspath(getattr(streaming, '__file__', '') or ''))


def run_clean(w: Worker, subject: Subject) -> bool:
    op = Op(w, 'clean')
    with UnlinkRecorder() as rec:
        try:
            subject.clean_stale_shared_memory()
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


def close_handle(shm) -> None:
    """Close our handle on the locals segment; Streaming has no release and unlinks nothing here."""
    if hasattr(shm, 'close'):
        shm.close()
    elif hasattr(getattr(shm, 'shm', None), 'close'):
        shm.shm.close()


def run(argv) -> int:
    if len(argv) != 2 or argv[1] != 'worker':
        sys.stderr.write('usage: adapter.py worker   (started by shmstress with the trial environment)\n')
        return EXIT_BAD_ENV
    # The protocol lets SIGTERM/SIGINT simply kill us: no exit handlers, like a killed trainer.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)

    log = EventLog.from_env()
    if not log.ok():
        sys.stderr.write('adapter.py: no event log (SHMSTRESS_EVENTS_FD / SHMSTRESS_EVENTS)\n')
        return EXIT_BAD_ENV
    w = Worker(log)
    role = os.environ.get('SHMSTRESS_ROLE', 'rank')

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
    distributed, reason = 'none', DISTRIBUTED_REASON
    if subject.standin and os.environ.get('SHMSTRESS_STANDIN_PROCESS_GROUP') == 'file':
        distributed, reason = 'emulated', EMULATED_REASON
    elif role != 'cleanup':
        distributed, reason = init_process_group()
    w.emit('subject', available=True, distributed=distributed, reason=reason, name='streaming',
           version=subject.version, path=subject.path, standin=subject.standin, root=subject.root)

    if role == 'cleanup':
        return EXIT_OK if run_clean(w, subject) else EXIT_FAILED

    rng = random.Random(env_int('SHMSTRESS_SEED', 1))
    sleep_range(rng, ops.get('start_jitter_ms'))
    late = env_int('SHMSTRESS_START_DELAY_MS', 0)  # a late joiner
    if late > 0:
        time.sleep(late / 1000.0)

    all_ok = True
    if ops.get('clean_before', False):
        all_ok &= run_clean(w, subject)

    streams_local = [str(d.get('path', '')) if isinstance(d, dict) else str(d) for d in dirs]
    streams_remote = [REMOTE_SCHEME + str(d.get('path', '')) if isinstance(d, dict) and d.get('remote') else None
                      for d in dirs]
    root = subject.root
    world = None
    prefix = None
    shm = None
    if all_ok and ops.get('acquire', True):
        op = Op(w, 'acquire', {'local_world_size': env_int('SHMSTRESS_LOCAL_WORLD_SIZE', 0)})
        try:
            world = subject.World.detect()
            prefix, shm = subject.get_shm_prefix(streams_local, streams_remote, world)
        except Exception as exc:  # pylint: disable=broad-except
            op.fail(exc)
            all_ok = False
            prefix = None
        else:
            op.ok({'prefix': prefix, 'present': list_present(root, prefix)})
            w.emit('fds', count=count_fds())

    held = prefix is not None
    if held and world.is_local_leader:
        for kind in ops.get('segments', []) or []:
            name = f'/{root}{prefix:06}_{kind}'
            op = Op(w, 'segment', {'name': name})
            try:
                fd = os.open(SHM_DIR + name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o600)
                try:
                    os.ftruncate(fd, 4096)
                finally:
                    os.close(fd)
            except Exception as exc:  # pylint: disable=broad-except
                op.fail(exc)
                all_ok = False
            else:
                op.ok({'name': name})

    rounds = int(ops.get('rounds', 0) or 0)
    if held and all_ok and rounds > 0:
        late = env_int('SHMSTRESS_ATTACH_DELAY_MS', 0)  # a late barrier joiner
        if late > 0:
            time.sleep(late / 1000.0)
        # Streaming counts the processes of a node itself; a scenario may override the count.
        num_procs = env_int('SHMSTRESS_BARRIER_PROCS', world.workers_per_node)
        barrier = None
        op = Op(w, 'barrier_attach', {'num_procs': num_procs})
        try:
            lock_path = os.path.join(tempfile.gettempdir(), f'{root}{prefix:06}_barrier_filelock')
            barrier = subject.SharedBarrier(lock_path, f'{prefix:06}_barrier')
        except Exception as exc:  # pylint: disable=broad-except
            op.fail(exc)
            all_ok = False
        else:
            op.ok()
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

    if held:
        sleep_range(rng, ops.get('hold_ms'))
        if ops.get('release', True):
            op = Op(w, 'release', {'prefix': prefix})
            try:
                close_handle(shm)
            except Exception as exc:  # pylint: disable=broad-except
                op.fail(exc)
                all_ok = False
            else:
                op.ok()
    if ops.get('clean_after', False):
        all_ok &= run_clean(w, subject)
    return EXIT_OK if all_ok else EXIT_FAILED



def init_process_group():
    """Initialises torch.distributed the way a launcher would, so the package's
    dist.barrier() calls run as in a real multi-rank job: a gloo group per job
    (one SHMSTRESS_JOB_KEY), rendezvous on a loopback TCP port derived from the
    trial and job, bounded by the acquire deadline. World size 1, or no torch:
    no group, and the reason says so. Returns (distributed, reason).

    Untested on the machines shmstress is developed on: torch cannot be
    installed there (no PyPI); the stand-in's emulated group covers the path.
    """
    world = env_int('SHMSTRESS_WORLD_SIZE', 1)
    if world <= 1:
        return 'none', 'world size 1: no process group needed'
    try:
        import datetime
        import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    except Exception as exc:  # pylint: disable=broad-except
        return 'none', f'torch.distributed not importable ({type(exc).__name__}); {DISTRIBUTED_REASON}'
    if dist.is_initialized():
        return 'gloo', 'torch.distributed already initialised by the environment'
    # Every rank of a job derives the same port from the trial dir and job key;
    # jobs and trials get different ones (loopback only).
    key = os.path.dirname(os.environ.get('SHMSTRESS_EVENTS', '')) + '/' + os.environ.get('SHMSTRESS_JOB_KEY', 'job')
    port = 20000 + (zlib.crc32(key.encode()) % 20000)
    timeout = datetime.timedelta(milliseconds=env_int('SHMSTRESS_ACQUIRE_TIMEOUT_MS', 30000))
    try:
        dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=env_int('SHMSTRESS_RANK', 0),
                                world_size=world, timeout=timeout)
    except Exception as exc:  # pylint: disable=broad-except
        return 'none', f'gloo process group on 127.0.0.1:{port} failed ({type(exc).__name__}: {exc})'
    return 'gloo', f'gloo process group per job on 127.0.0.1:{port}'

def main() -> int:
    try:
        return run(sys.argv)
    except Exception:  # pylint: disable=broad-except
        sys.stderr.write('adapter.py: uncaught exception\n' + traceback.format_exc())
        return EXIT_BUG


if __name__ == '__main__':
    sys.exit(main())
