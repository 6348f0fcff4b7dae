#!/usr/bin/python3
"""shmstress subject adapter for joblib's memmapping pool (worker protocol v1, docs/worker-protocol.md).

Run by the harness as ``/usr/bin/python3 subjects/joblib/adapter.py worker`` with the trial's
environment. One harness rank is one joblib *parent*: a process that makes one
``Parallel(n_jobs=k, max_nbytes=...)`` call over real numpy arrays, so that joblib dumps each array
into a memmapped file of its temporary folder (``/dev/shm/joblib_memmapping_folder_<pid>_<ids>``, or
the temp dir when /dev/shm has less than 2 GB free) and hands it to k loky worker processes, real
processes started by loky, which memmap it while their task runs.

The adapter does not change what joblib does. It observes joblib's own calls in the parent process
by wrapping the names joblib's ``_memmapping_reducer`` module uses (its ``os.makedirs`` /
``os.chmod``, ``dump``, ``delete_folder`` and ``resource_tracker``), each wrapper calling the real
function and reporting what happened as an op: ``folder`` and ``file`` (created, with dev/inode and
the mode as created), ``chmod``, ``track`` (the resource tracker's register / unregister /
maybe_unlink), ``remove`` (what a delete removed). The pool itself is the op ``pool`` (invoke when
the call starts, ok or fail when it returns); while it runs a thread witnesses every folder and file
the parent created (``witness`` with ``when = "live"``, with the pool workers that map each file),
and logs ``mapped`` the first time it sees pool workers map a file (they are busy with it).
See docs/joblib.md.

One knob changes joblib's configuration: loky's ``idle_worker_timeout`` (300 s by default, no
public argument in 1.2.0: passed as LokyBackend.configure's own argument through the Parallel
object's backend arguments) is ``SHMSTRESS_JOBLIB_IDLE_TIMEOUT_S`` (default 3 s), so that a pool
whose parent was killed ends within a trial rather than five minutes later.

Exit codes: 0 the pool call (and the cleanup role's look) succeeded, 1 it failed (a ``fail`` event
says why), 2 bad environment, 3 joblib or numpy cannot be imported (a ``subject`` event with
``available: false`` says why), 70 a bug in this adapter. Observed internal ops (``remove``, ...)
may fail without failing the worker: joblib handles those errors itself.
"""

import errno
import json
import os
import random
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
import traceback

# The protocol's shared writing (subjects/_common), beside this subject's folder.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '_common'))
# pylint: disable=wrong-import-position
from shmstress_protocol import (EXIT_BAD_ENV, EXIT_BUG, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, PIPE_BUF,  # noqa: E402
                                SHM_DIR, cpu_wait_ns, encode, env_int, mono_ns)

FOLDER_STEM = 'joblib_memmapping_folder_'

N_JOBS = 2  # pool workers per parent (issue 18's [job.loader] workers will set it per job)
ARRAY_BYTES = 1 << 20  # each array of the workload's `segments`: 1 MiB of float64
MAX_NBYTES = '64K'  # arrays above this are memmapped (joblib's default is 1M)
WITNESS_EVERY_S = 0.1


def env_float(key: str, default: float) -> float:
    value = os.environ.get(key, '')
    try:
        return float(value) if value != '' else default
    except ValueError:
        return default


# ---------------------------------------------------------------------------------------------
# Events: one JSON line per write(2), at most PIPE_BUF bytes


def fit_line(event: dict) -> bytes:
    """One line of at most PIPE_BUF bytes: long lists and messages are cut and marked truncated."""
    data = encode(event)
    if len(data) <= PIPE_BUF:
        return data
    event = json.loads(json.dumps(event))
    error = event.get('error')
    if isinstance(error, dict) and len(str(error.get('message', ''))) > 512:
        error['message'] = str(error['message'])[:512] + '... (truncated)'
        data = encode(event)
    for key in ('value', 'args'):
        holder = event.get(key)
        while len(data) > PIPE_BUF and isinstance(holder, dict):
            lists = [k for k, v in holder.items() if isinstance(v, list) and v]
            if not lists:
                break
            longest = max(lists, key=lambda k: len(encode({k: holder[k]})))
            holder[longest] = holder[longest][:len(holder[longest]) // 2]
            holder['truncated'] = True
            data = encode(event)
    if len(data) > PIPE_BUF:
        keep = ('t', 'type', 'pid', 'job', 'rank', 'local_rank', 'op', 'id')
        event = {k: event[k] for k in keep if k in event}
        event['truncated'] = True
        data = encode(event)
    return data


class EventLog:
    """The trial's history file: SHMSTRESS_EVENTS_FD when given, else SHMSTRESS_EVENTS (O_APPEND)."""

    def __init__(self) -> None:
        self.fd = -1
        fd = env_int('SHMSTRESS_EVENTS_FD', -1)
        if fd >= 0:
            try:
                os.fstat(fd)
                self.fd = fd
                return
            except OSError:
                pass
        path = os.environ.get('SHMSTRESS_EVENTS', '')
        if path:
            try:
                self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
            except OSError:
                self.fd = -1

    def emit(self, event: dict) -> None:
        try:
            os.write(self.fd, fit_line(event))
        except OSError:
            pass  # nowhere left to report it


class Worker:
    """This process's identity and its op sequence (ops are logged from joblib's threads too)."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.job = env_int('SHMSTRESS_JOB', -1)
        self.rank = env_int('SHMSTRESS_RANK', -1)
        self.local_rank = env_int('SHMSTRESS_LOCAL_RANK', self.rank)
        self.pid = os.getpid()
        self._next_id = 0
        self._lock = threading.Lock()

    def new_id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def emit(self, type_: str, **fields) -> None:
        event = {'t': mono_ns(), 'type': type_, 'pid': os.getpid(), 'job': self.job, 'rank': self.rank,
                 'local_rank': self.local_rank}
        event.update(fields)
        if event['pid'] != self.pid:
            # A process forked from this rank that did not exec (loky's fork_exec child when
            # close_fds fails, e.g. EMFILE reading /proc/self/fd) runs the rank's Python code,
            # joblib's cleanup and exit handlers included. Its events would claim the rank's
            # identity with a pid the harness never started and never reaps: they go to stderr.
            try:
                os.write(2, b'adapter.py: forked child of the rank, not logged: ' + fit_line(event))
            except OSError:
                pass
            return
        self.log.emit(event)


def classify(exc: BaseException) -> dict:
    """A Python exception as a protocol error {code, message, errno}."""
    text = str(exc)
    name = type(exc).__name__
    message = f'{name}: {text}' if text else name
    err = exc.errno if isinstance(exc, OSError) and isinstance(exc.errno, int) else 0
    if name == 'TerminatedWorkerError':
        code = 'worker-died'  # loky: a pool worker was killed (SIGKILL, OOM) under a running call
    elif name in ('BrokenProcessPool', 'ShutdownExecutorError'):
        code = 'broken'
    elif isinstance(exc, PermissionError):
        code = 'permission'
    elif isinstance(exc, FileExistsError):
        code = 'exists'
    elif isinstance(exc, FileNotFoundError):
        code = 'not-found'
    elif isinstance(exc, OSError) and err in (errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.ENOMEM):
        code = 'exhausted'
    elif isinstance(exc, MemoryError):
        code = 'exhausted'
    elif isinstance(exc, OSError) and err == errno.EROFS:
        code = 'permission'
    elif isinstance(exc, OSError) and 'Expected empty folder' in text:
        code = 'not-empty'  # joblib.disk.delete_folder(allow_non_empty=False) gave up
    else:
        code = 'io'
    return {'code': code, 'message': message, 'errno': err}


class Op:
    """invoke now; ok(value) or fail(exception) later, from the same thread."""

    def __init__(self, worker: Worker, name: str, args: dict = None) -> None:
        self.worker = worker
        self.name = name
        self.id = worker.new_id()
        t = mono_ns()
        worker.emit('invoke', op=name, id=self.id, args=args if args is not None else {}, **self._wait(), t=t)

    @staticmethod
    def _wait() -> dict:
        wait = cpu_wait_ns()
        return {'cpu_wait_ns': wait} if wait >= 0 else {}

    def ok(self, value: dict = None) -> None:
        wait = self._wait()
        self.worker.emit('ok', op=self.name, id=self.id, value=value if value is not None else {}, **wait, t=mono_ns())

    def fail(self, exc: BaseException, **extra) -> None:
        wait = self._wait()
        self.worker.emit('fail', op=self.name, id=self.id, error=classify(exc), **extra, **wait, t=mono_ns())


def sleep_range(rng: random.Random, spec) -> None:
    """Sleep a uniform number of ms in [lo, hi] (or a fixed number)."""
    ms = draw_ms(rng, spec)
    if ms > 0:
        time.sleep(ms / 1000.0)


def draw_ms(rng: random.Random, spec) -> int:
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return int(spec)
    if isinstance(spec, list) and len(spec) == 2:
        lo, hi = int(spec[0]), int(spec[1])
        return rng.randint(lo, hi) if hi > lo else lo
    return 0


def observe(path: str) -> dict:
    """What lstat(2) shows of a path now: {name, dev, ino, mode, uid} or {name, missing} or {name, error}."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {'name': path, 'missing': True}
    except OSError as exc:
        return {'name': path, 'error': f'{errno.errorcode.get(exc.errno, "E?")}: {exc.strerror}'}
    return {'name': path, 'dev': st.st_dev, 'ino': st.st_ino, 'mode': stat.S_IMODE(st.st_mode), 'uid': st.st_uid}


def pool_workers() -> list:
    """Pids of this process's children that are loky workers (the pool), from /proc."""
    me = os.getpid()
    out = []
    try:
        names = os.listdir('/proc')
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f'/proc/{name}/stat', 'rb') as f:
                ppid = int(f.read().rsplit(b')', 1)[1].split()[1])
            if ppid != me:
                continue
            with open(f'/proc/{name}/cmdline', 'rb') as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if b'popen_loky_posix' in cmd:
            out.append(int(name))
    return sorted(out)


def mapped_by(pids: list, paths: list) -> dict:
    """For each path, which of the pids map it right now (/proc/<pid>/maps)."""
    found = {p: [] for p in paths}
    for pid in pids:
        try:
            with open(f'/proc/{pid}/maps', 'rb') as f:
                maps = f.read()
        except OSError:
            continue
        for p in paths:
            if p.encode() in maps:
                found[p].append(pid)
    return found


class _Proxy:
    """A module seen through some replaced attributes; everything else is the real module's."""

    def __init__(self, real, **replaced) -> None:
        self.__dict__['_real'] = real
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(self.__dict__['_real'], name)


# ---------------------------------------------------------------------------------------------
# What the parent's joblib does, as ops


class Recorder:
    """Wraps the names joblib's _memmapping_reducer calls, reporting each call as an op.

    Every wrapper calls the real function with the same arguments and returns (or raises) what it
    did: joblib's behaviour is unchanged. It keeps, for witnesses, every folder and file created
    (name, dev, ino), and forgets what this process itself began to remove.
    """

    def __init__(self, w: Worker, jl) -> None:
        self.w = w
        self.jl = jl
        self.lock = threading.Lock()
        self.created = []  # (name, kind), in creation order, still held (not removed by us)
        self.removing = set()  # names this process began to remove (own cleanup, tracker decref)

    # -- creation

    def makedirs(self, real):
        def makedirs(name, mode=0o777, exist_ok=False):
            path = os.fspath(name)
            if os.path.isdir(path):  # joblib's lazy makedirs when the folder exists: EEXIST, no op
                return real(name, mode, exist_ok)
            op = Op(self.w, 'folder', {'name': path, 'mode': mode})
            try:
                real(name, mode, exist_ok)
            except BaseException as exc:
                op.fail(exc)
                raise
            seen = observe(path)
            seen['shared_mem'] = path.startswith(SHM_DIR + '/')
            seen['umask'] = current_umask()
            op.ok(seen)
            self._hold(path, 'folder')
            return None
        return makedirs

    def chmod(self, real):
        def chmod(path, mode, *a, **kw):
            p = os.fspath(path)
            before = observe(p)
            op = Op(self.w, 'chmod', {'name': p, 'mode': mode, 'before': before.get('mode')})
            try:
                real(path, mode, *a, **kw)
            except BaseException as exc:
                op.fail(exc)
                raise
            op.ok(observe(p))
        return chmod

    def dump(self, real):
        def dump(value, filename, *a, **kw):
            path = os.fspath(filename)
            op = Op(self.w, 'file', {'name': path})
            try:
                names = real(value, filename, *a, **kw)
            except BaseException as exc:
                op.fail(exc)
                raise
            names = list(names) if names is not None else [path]
            first = names[0] if names else path
            seen = observe(first)
            seen['bytes'] = getattr(value, 'nbytes', None)
            op.ok(seen)  # mode as created, before joblib's chmod
            self._hold(first, 'file')
            for extra in names[1:]:  # another file the same dump wrote
                more = Op(self.w, 'file', {'name': os.fspath(extra)})
                more.ok(observe(os.fspath(extra)))
                self._hold(os.fspath(extra), 'file')
            return names
        return dump

    # -- the resource tracker

    def tracker(self, real_module):
        def wrap(cmd):
            real = getattr(real_module, cmd)

            def call(name, rtype):
                if cmd == 'maybe_unlink':
                    self._removing(name)  # the tracker unlinks it once its count reaches 0
                op = Op(self.w, 'track', {'cmd': cmd, 'name': name, 'rtype': rtype})
                try:
                    real(name, rtype)
                except BaseException as exc:
                    op.fail(exc)
                    raise
                op.ok({'tracker_pid': getattr(getattr(real_module, '_resource_tracker', None), '_pid', None)})
            return call
        return _Proxy(real_module, register=wrap('register'), unregister=wrap('unregister'),
                      maybe_unlink=wrap('maybe_unlink'))

    # -- removal

    def delete_folder(self, real):
        def delete_folder(folder_path, onerror=None, allow_non_empty=True):
            path = os.fspath(folder_path)
            if not os.path.isdir(path):
                return real(folder_path, onerror, allow_non_empty)
            before = [observe(path)] + [observe(os.path.join(path, n)) for n in safe_listdir(path)]
            self._removing(path)
            op = Op(self.w, 'remove', {'name': path, 'allow_non_empty': bool(allow_non_empty),
                                       'present': [b for b in before if 'dev' in b]})
            failed = None
            try:
                real(folder_path, onerror, allow_non_empty)
            except BaseException as exc:  # joblib catches it (the atexit finalizer warns)
                failed = exc
            removed = [b['name'] for b in before if 'dev' in b and observe(b['name']) != b]
            if failed is not None:
                op.fail(failed, value={'removed': removed})
                if not removed:  # nothing went: it still holds them
                    self._unremove(path)
                raise failed
            op.ok({'removed': removed})
            return None
        delete_folder.__module__ = 'joblib.disk'  # joblib's atexit finalizer re-imports it by module
        return delete_folder

    # -- bookkeeping

    def _hold(self, name: str, kind: str) -> None:
        with self.lock:
            self.removing.discard(name)
            self.created.append((name, kind))

    def _removing(self, name: str) -> None:
        with self.lock:
            self.removing.add(name)
            for held, _ in self.created:
                if held.startswith(name.rstrip('/') + '/'):
                    self.removing.add(held)

    def _unremove(self, name: str) -> None:
        with self.lock:
            self.removing.discard(name)

    def held(self) -> list:
        with self.lock:
            return [n for n, _ in self.created if n not in self.removing]

    def files(self) -> list:
        with self.lock:
            return [n for n, kind in self.created if kind == 'file']

    def everything(self) -> list:
        with self.lock:
            return [n for n, _ in self.created]

    def install(self) -> None:
        mr = self.jl.memmapping
        real_os = mr.os
        mr.os = _Proxy(real_os, makedirs=self.makedirs(real_os.makedirs), chmod=self.chmod(real_os.chmod))
        mr.dump = self.dump(mr.dump)
        mr.resource_tracker = self.tracker(mr.resource_tracker)
        wrapped = self.delete_folder(self.jl.disk.delete_folder)
        mr.delete_folder = wrapped
        self.jl.disk.delete_folder = wrapped


def safe_listdir(path: str) -> list:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def witness(w: Worker, names: list, when: str, workers: list = None) -> list:
    """What lstat(2) shows now of each name (docs/worker-protocol.md, witnesses), with the pool
    workers that map each file. Returns the entries."""
    if not names:
        return []
    op = Op(w, 'witness', {'when': when})
    seen = [observe(n) for n in names]
    if workers:
        maps = mapped_by(workers, [s['name'] for s in seen if 'dev' in s])
        for s in seen:
            if 'dev' in s:
                s['mapped_by'] = maps.get(s['name'], [])
    op.ok({'segments': seen})
    return seen


class LiveWitness(threading.Thread):
    """Witnesses what the parent holds every WITNESS_EVERY_S while its pool op is open. The first
    time it sees pool workers map a file it also logs `mapped` (the workers are busy with it), an
    event a scenario can place a fault after (signal-on-event after = "ok:mapped")."""

    def __init__(self, w: Worker, rec: Recorder) -> None:
        super().__init__(name='shmstress-witness', daemon=True)
        self.w = w
        self.rec = rec
        self.done = threading.Event()
        self.mapped = set()

    def run(self) -> None:
        while not self.done.wait(WITNESS_EVERY_S):
            names = self.rec.held()
            if not names:
                continue
            files = set(self.rec.files())
            for s in witness(self.w, names, 'live', pool_workers()):
                if s['name'] in files and s.get('mapped_by') and s['name'] not in self.mapped:
                    self.mapped.add(s['name'])
                    Op(self.w, 'mapped', {'name': s['name']}).ok({'name': s['name'], 'workers': s['mapped_by']})

    def stop(self) -> None:
        self.done.set()
        self.join()


# ---------------------------------------------------------------------------------------------
# The subject


class Joblib:
    """The imported package's modules."""

    def __init__(self) -> None:
        import numpy  # pylint: disable=import-outside-toplevel
        import joblib  # pylint: disable=import-outside-toplevel
        from joblib import Parallel, delayed, disk  # pylint: disable=import-outside-toplevel
        from joblib import _memmapping_reducer as memmapping  # pylint: disable=import-outside-toplevel
        from joblib.externals import loky  # pylint: disable=import-outside-toplevel
        self.np = numpy
        self.Parallel = Parallel
        self.delayed = delayed
        self.disk = disk
        self.memmapping = memmapping
        self.version = str(getattr(joblib, '__version__', 'unknown'))
        self.loky_version = str(getattr(loky, '__version__', 'unknown'))
        self.path = os.path.dirname(os.path.abspath(joblib.__file__))


def task(index: int, hold_ms: int, kill: dict, *arrays):
    """One task, run by a loky worker on the memmapped arrays: holds them `hold_ms` (the worker is
    busy with them mapped), then returns what it saw. `kill` is an injected pool-worker death
    (SHMSTRESS_POOL_WORKER_KILL): the worker running task `kill["task"]` SIGKILLs itself
    `kill["delay_ms"]` into it, its arrays mapped, as the OOM killer or a segfault would end it."""
    if kill and kill.get('task') == index:
        time.sleep(max(int(kill.get('delay_ms', 0)), 0) / 1000.0)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(hold_ms / 1000.0)
    return {'pid': os.getpid(), 'index': index, 'sums': [float(a[:16].sum()) for a in arrays],
            'files': [getattr(a, 'filename', None) for a in arrays]}


def temp_roots() -> list:
    """Where this trial's joblib folders can be: /dev/shm, JOBLIB_TEMP_FOLDER, the temp dir."""
    roots = [SHM_DIR]
    for r in (os.environ.get('JOBLIB_TEMP_FOLDER', ''), tempfile.gettempdir()):
        if r and r not in roots:
            roots.append(r)
    return roots


def joblib_folders() -> list:
    out = []
    for root in temp_roots():
        out += [os.path.join(root, n) for n in safe_listdir(root) if n.startswith(FOLDER_STEM)]
    return out


def shm_free_bytes() -> int:
    try:
        st = os.statvfs(SHM_DIR)
        return st.f_bsize * st.f_bavail
    except OSError:
        return -1


def run_clean(w: Worker) -> bool:
    """joblib has no stale cleanup: a `clean` only looks. It removes nothing and reports, as kept,
    every joblib folder it finds (what a user's `ls /dev/shm` would show).

    SHMSTRESS_JOBLIB_CLEAN=sweep makes it the workaround users post instead (joblib #198: `rm -rf
    /dev/shm/joblib_memmapping_folder_*`): every joblib folder found is removed, live or not. Not
    joblib's code: a known-bad cleanup, to show cleanup.safety catching a removal under a live pool."""
    op = Op(w, 'clean')
    found = joblib_folders()
    if os.environ.get('SHMSTRESS_JOBLIB_CLEAN', '') != 'sweep':
        op.ok({'removed': [], 'kept': found, 'skipped': []})
        return True
    removed, kept = [], []
    for folder in found:
        before = [folder] + [os.path.join(folder, n) for n in safe_listdir(folder)]
        shutil.rmtree(folder, ignore_errors=True)
        gone = [n for n in before if 'missing' in observe(n)]
        removed += gone
        if folder not in gone:
            kept.append(folder)
    op.ok({'removed': removed, 'kept': kept, 'skipped': []})
    return True


def run_pool(w: Worker, jl: Joblib, rec: Recorder, ops: dict, rng: random.Random, kill: dict,
             idle_s: float) -> bool:
    segments = [str(s) for s in (ops.get('segments') or [])]
    rounds = max(int(ops.get('rounds', 0) or 0), 1)
    tasks = rounds * N_JOBS
    holds = [draw_ms(rng, ops.get('round_jitter_ms')) for _ in range(tasks)]
    count = ARRAY_BYTES // 8
    arrays = [jl.np.arange(count, dtype=jl.np.float64) + i for i in range(len(segments))]
    args = {'n_jobs': N_JOBS, 'tasks': tasks, 'max_nbytes': MAX_NBYTES, 'arrays': segments,
            'array_bytes': ARRAY_BYTES, 'task_ms': holds, 'idle_worker_timeout_s': idle_s}
    if kill:
        args['kill'] = kill
    live = LiveWitness(w, rec)
    op = Op(w, 'pool', args)
    live.start()
    try:
        par = jl.Parallel(n_jobs=N_JOBS, max_nbytes=MAX_NBYTES)
        # LokyBackend.configure(idle_worker_timeout=300) has no public knob in joblib 1.2.0.
        par._backend_args['idle_worker_timeout'] = idle_s  # pylint: disable=protected-access
        results = par(jl.delayed(task)(i, holds[i], kill, *arrays) for i in range(tasks))
    except BaseException as exc:  # pylint: disable=broad-except
        live.stop()
        op.fail(exc, value={'workers': pool_workers()})
        return False
    live.stop()
    from joblib.externals.loky.backend import resource_tracker  # pylint: disable=import-outside-toplevel
    op.ok({'workers': sorted({r['pid'] for r in results}), 'alive': pool_workers(),
           'resource_tracker': getattr(resource_tracker._resource_tracker, '_pid', None),  # pylint: disable=protected-access
           'files': sorted({f for r in results for f in r['files'] if f}), 'results': len(results)})
    return True


def run(argv) -> int:
    if len(argv) != 2 or argv[1] != 'worker':
        sys.stderr.write('usage: adapter.py worker   (started by shmstress with the trial environment)\n')
        return EXIT_BAD_ENV
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    log = EventLog()
    if log.fd < 0:
        sys.stderr.write('adapter.py: no event log (SHMSTRESS_EVENTS_FD / SHMSTRESS_EVENTS)\n')
        return EXIT_BAD_ENV
    w = Worker(log)
    role = os.environ.get('SHMSTRESS_ROLE', 'rank')
    ops, kill = {}, {}
    idle_s = env_float('SHMSTRESS_JOBLIB_IDLE_TIMEOUT_S', 3.0)
    if role != 'cleanup':
        try:
            ops = json.loads(os.environ.get('SHMSTRESS_OPS', '') or '{}')
            if not isinstance(ops, dict):
                raise ValueError('SHMSTRESS_OPS must be an object')
            kill = json.loads(os.environ.get('SHMSTRESS_POOL_WORKER_KILL', '') or '{}')
            if not isinstance(kill, dict):
                raise ValueError('SHMSTRESS_POOL_WORKER_KILL must be an object')
        except ValueError as exc:
            sys.stderr.write(f'adapter.py: bad environment: {exc}\n')
            return EXIT_BAD_ENV
    try:
        jl = Joblib()
    except Exception as exc:  # pylint: disable=broad-except
        w.emit('subject', available=False,
               reason=f'cannot import joblib and numpy ({type(exc).__name__}: {exc}); python {sys.executable} '
                      '(Debian: apt-get install python3-joblib python3-numpy)')
        return EXIT_UNAVAILABLE
    w.emit('subject', available=True, name='joblib', version=jl.version, loky=jl.loky_version,
           numpy=str(jl.np.__version__), path=jl.path, n_jobs=N_JOBS, max_nbytes=MAX_NBYTES,
           idle_worker_timeout_s=idle_s, umask=current_umask(),
           shm_free_bytes=shm_free_bytes(), temp_dir=tempfile.gettempdir(),
           joblib_temp_folder=os.environ.get('JOBLIB_TEMP_FOLDER'),
           reason='joblib Parallel (loky backend) memmapping numpy arrays to its pool workers')
    if role == 'cleanup':
        return EXIT_OK if run_clean(w) else EXIT_FAILED

    rec = Recorder(w, jl)
    rec.install()
    rng = random.Random(env_int('SHMSTRESS_SEED', 1))
    sleep_range(rng, ops.get('start_jitter_ms'))
    late = env_int('SHMSTRESS_START_DELAY_MS', 0)
    if late > 0:
        time.sleep(late / 1000.0)
    all_ok = True
    if ops.get('clean_before', False):
        all_ok &= run_clean(w)
    if ops.get('acquire', True):
        all_ok &= run_pool(w, jl, rec, ops, rng, kill, idle_s)
        # The parent lives on with its idle pool (loky keeps its workers idle_worker_timeout).
        sleep_range(rng, ops.get('hold_ms'))
    if ops.get('clean_after', False):
        all_ok &= run_clean(w)
    witness(w, rec.everything(), 'end', pool_workers())
    # Exiting runs joblib's atexit finalizers (delete_folder, logged as `remove`) and loky's shutdown.
    return EXIT_OK if all_ok else EXIT_FAILED


def main() -> int:
    try:
        return run(sys.argv)
    except Exception:  # pylint: disable=broad-except
        sys.stderr.write('adapter.py: uncaught exception\n' + traceback.format_exc())
        return EXIT_BUG


if __name__ == '__main__':
    sys.exit(main())
