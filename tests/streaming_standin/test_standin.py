"""The Streaming stand-in keeps the original's flaws, and the adapter speaks worker protocol v1.

Run from the repository root:

    /usr/bin/python3 -m unittest discover -s tests/streaming_standin -v

Every test uses its own name root ``sstest.<pid>.<n>.`` (via SHMSTRESS_ROOT, which the stand-in and
the adapter put in front of every shm and lock-file name) and its own TMPDIR, and removes what it
created; the module checks at the end that nothing with its roots is left in /dev/shm.
"""

import json
import os
import importlib.util
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from multiprocessing import resource_tracker

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ADAPTER = os.path.join(REPO, 'subjects', 'streaming', 'adapter.py')
PYTHON = '/usr/bin/python3'
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# pylint: disable=wrong-import-position
from streaming.base.constant import SHM_TO_CLEAN
from streaming.base.shared import prefix as prefix_mod
from streaming.base.shared.barrier import SharedBarrier
from streaming.base.shared.memory import SharedMemory
from streaming.base.shared.prefix import _pack_locals, get_shm_prefix
from streaming.base.util import clean_stale_shared_memory
from streaming.base.world import World

from multiprocessing.shared_memory import SharedMemory as SharedMemoryCPython  # noqa: E402

ROOT_BASE = f'sstest.{os.getpid()}.'
HAVE_TORCH = subprocess.run([PYTHON, '-c', 'import torch.distributed'], capture_output=True, check=False).returncode == 0


def load_protocol():
    """subjects/_common/shmstress_protocol.py, what every adapter writes events with."""
    spec = importlib.util.spec_from_file_location(
        'shmstress_protocol', os.path.join(REPO, 'subjects', '_common', 'shmstress_protocol.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_adapter():
    spec = importlib.util.spec_from_file_location('shmstress_adapter', ADAPTER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
SHM = '/dev/shm'
ENV_KEYS = ('SHMSTRESS_ROOT', 'RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'LOCAL_RANK', 'TMPDIR',
            'SHMSTRESS_STANDIN_PROCESS_GROUP', 'SHMSTRESS_PROCESS_GROUP', 'SHMSTRESS_STANDIN_VARIANT')


def shm_names(root):
    return sorted(n for n in os.listdir(SHM) if n.startswith(root))


def open_fds():
    return len(os.listdir('/proc/self/fd')) - 1


def world(rank=0, world_size=1, local_world_size=1):
    return World(world_size // local_world_size, local_world_size, 1, rank)


LEADER = world(0, 1, 1)


class Case(unittest.TestCase):
    counter = 0

    def setUp(self):
        Case.counter += 1
        self.root = f'{ROOT_BASE}{Case.counter}.'
        self.tmp = tempfile.mkdtemp(prefix='sstest.')
        self._env = {k: os.environ.get(k) for k in ENV_KEYS}
        for k in ENV_KEYS:
            os.environ.pop(k, None)
        os.environ['SHMSTRESS_ROOT'] = self.root
        self._tempdir = tempfile.tempdir
        tempfile.tempdir = self.tmp  # the stand-in's gettempdir(): lock files go here
        # In-process tests look at the kept flaws, not at CPython's resource tracker (tested in a
        # subprocess below): keep this process's segments out of it, so tearDown's removals stay quiet.
        self._tracker = (resource_tracker.register, resource_tracker.unregister)
        resource_tracker.register = lambda name, rtype: None if rtype == 'shared_memory' else self._tracker[0](name, rtype)
        resource_tracker.unregister = lambda name, rtype: None if rtype == 'shared_memory' else self._tracker[1](name, rtype)

    def tearDown(self):
        for n in shm_names(self.root):
            os.unlink(os.path.join(SHM, n))
        resource_tracker.register, resource_tracker.unregister = self._tracker
        tempfile.tempdir = self._tempdir
        for k, v in self._env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.tmp, ignore_errors=True)

    # What a killed job leaves behind (written directly: no resource tracker knows it).
    def leak_locals(self, p, dirs):
        self.leak(p, 'locals', content=_pack_locals(dirs, p))

    def leak(self, p, kind, size=64, content=b''):
        fd = os.open(os.path.join(SHM, f'{self.root}{p:06}_{kind}'), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.write(fd, content)
            os.ftruncate(fd, max(size, len(content)))
        finally:
            os.close(fd)

    def lock_file(self, p, kind='barrier_filelock'):
        with open(os.path.join(self.tmp, f'{self.root}{p:06}_{kind}'), 'w', encoding='utf-8'):
            pass

    def exists(self, p, kind):
        return os.path.exists(os.path.join(SHM, f'{self.root}{p:06}_{kind}'))


class WorldTest(Case):

    def test_missing_local_world_size_makes_every_rank_a_leader(self):
        os.environ['WORLD_SIZE'] = '4'
        leaders = []
        for rank in range(4):
            os.environ['RANK'] = str(rank)
            leaders.append(World.detect().is_local_leader)
        self.assertEqual(leaders, [True, True, True, True])
        os.environ['LOCAL_WORLD_SIZE'] = '4'
        leaders = []
        for rank in range(4):
            os.environ['RANK'] = str(rank)
            leaders.append(World.detect().is_local_leader)
        self.assertEqual(leaders, [True, False, False, False])


class PrefixTest(Case):

    def test_record_format_and_a_job_that_agrees(self):
        p, shm = get_shm_prefix(['/a', '/b'], ['s3://x', None], world(0, 2, 2))
        self.assertEqual(p, 0)
        with open(os.path.join(SHM, f'{self.root}000000_locals'), 'rb') as f:
            raw = f.read()
        body = b'/a\0/b\x000'
        self.assertEqual(raw, struct.pack('=i', 4 + len(body)) + body)
        self.assertEqual(oct(os.stat(os.path.join(SHM, f'{self.root}000000_locals')).st_mode & 0o777), '0o600')
        shm.close()

    def test_two_jobs_starting_together_pick_the_same_prefix(self):
        # Both walk before either registers (the walk-then-create window, widened on purpose by
        # holding each caller where dist.barrier() would be): the loser's leader gets EEXIST.
        meet = threading.Barrier(2)
        local = threading.local()

        def hold_after_walk():
            local.calls = getattr(local, 'calls', 0) + 1
            if local.calls == 1:
                meet.wait(timeout=10)

        results = {}

        def job(name, dirs):
            try:
                results[name] = get_shm_prefix(dirs, ['s3://x'], LEADER)[0]
            except Exception as exc:  # pylint: disable=broad-except
                results[name] = exc

        saved = prefix_mod._dist_barrier
        prefix_mod._dist_barrier = hold_after_walk
        try:
            threads = [threading.Thread(target=job, args=(n, [f'/data/{n}'])) for n in ('a', 'b')]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
        finally:
            prefix_mod._dist_barrier = saved
        errors = [r for r in results.values() if isinstance(r, Exception)]
        grants = [r for r in results.values() if not isinstance(r, Exception)]
        self.assertEqual(grants, [0], results)
        self.assertEqual(len(errors), 1, results)
        self.assertIsInstance(errors[0], FileExistsError)
        self.assertIn('File exists', str(errors[0]))
        self.assertIn('000000_locals', str(errors[0]))

    def test_a_rank_that_walked_early_meets_another_jobs_record(self):
        # A non-leader walked while p=0 was free; another job's leader registered p=0 meanwhile.
        def other_job_registers():
            if not self.exists(0, 'locals'):
                self.leak_locals(0, ['/other'])

        saved = prefix_mod._dist_barrier
        prefix_mod._dist_barrier = other_job_registers
        try:
            with self.assertRaisesRegex(RuntimeError, 'registered does not match local leader'):
                get_shm_prefix(['/mine'], ['s3://x'], world(1, 2, 2))
        finally:
            prefix_mod._dist_barrier = saved

    def test_a_rank_without_its_leader_fails_not_registered(self):
        with self.assertRaisesRegex(RuntimeError, 'not registered by local leader'):
            get_shm_prefix(['/mine'], ['s3://x'], world(1, 2, 2))

    def test_without_a_process_group_a_late_rank_meets_its_own_leaders_record(self):
        get_shm_prefix(['/mine'], ['s3://x'], world(0, 2, 2))
        with self.assertRaisesRegex(ValueError, 'Reused local directory'):
            get_shm_prefix(['/mine'], ['s3://x'], world(1, 2, 2), retry=1)

    def test_duplicate_local_dirs_are_refused(self):
        with self.assertRaisesRegex(ValueError, 'Reused local directory'):
            get_shm_prefix(['/d', '/d'], [None, None], LEADER)

    def test_killed_job_blocks_its_local_dir_until_cleanup(self):
        self.leak_locals(0, ['/d'])
        with self.assertRaisesRegex(ValueError, 'Reused local directory'):
            get_shm_prefix(['/d'], ['s3://x'], LEADER, retry=1)
        clean_stale_shared_memory()
        self.assertEqual(get_shm_prefix(['/d'], ['s3://x'], LEADER)[0], 0)

    def test_same_local_dir_without_remote_is_granted_another_prefix(self):
        self.leak_locals(0, ['/d'])
        self.assertEqual(get_shm_prefix(['/d'], [None], LEADER)[0], 1)

    def test_lock_file_hides_a_live_job_with_the_same_dir(self):
        p, shm = get_shm_prefix(['/d'], ['s3://x'], LEADER)
        b = SharedBarrier(os.path.join(self.tmp, f'{self.root}{p:06}_barrier_filelock'), f'{p:06}_barrier')
        b(1)  # the job has used its barrier: its lock file exists from now on
        self.assertEqual(get_shm_prefix(['/d'], ['s3://x'], LEADER, retry=0)[0], 1)  # no "Reused"
        shm.close()

    def test_leftover_lock_files_make_prefixes_climb(self):
        for p in range(5):
            self.lock_file(p, 'barrier_filelock' if p % 2 else 'cache_filelock')
        self.assertEqual(get_shm_prefix(['/d'], ['s3://x'], LEADER)[0], 5)

    def test_walk_stops_at_the_first_gap(self):
        self.leak_locals(1, ['/d'])  # a live job with our dir, above a gap
        self.assertEqual(get_shm_prefix(['/d'], ['s3://x'], LEADER, retry=0)[0], 0)

    def test_zero_length_locals_blocks_lookup_and_cleanup(self):
        os.close(os.open(os.path.join(SHM, f'{self.root}000000_locals'), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
        with self.assertRaisesRegex(ValueError, 'cannot mmap an empty file'):
            get_shm_prefix(['/d'], ['s3://x'], LEADER, retry=2)
        with self.assertRaisesRegex(ValueError, 'cannot mmap an empty file'):
            clean_stale_shared_memory()
        self.assertTrue(self.exists(0, 'locals'))

    def test_walk_keeps_every_attached_fd_open(self):
        stale = 10
        for p in range(stale):
            self.leak_locals(p, [f'/old/{p}'])
            for kind in SHM_TO_CLEAN[1:]:
                self.leak(p, kind)
        before = open_fds()
        p, shm = get_shm_prefix(['/new'], ['s3://x'], LEADER)
        self.assertEqual(p, stale)
        grown = open_fds() - before
        # 9 kinds x 10 prefixes attached, each holding its shm fd and the mapping's duplicate.
        self.assertGreaterEqual(grown, 2 * len(SHM_TO_CLEAN) * stale)
        shm.close()


class BarrierTest(Case):

    def barrier(self, p=0):
        return SharedBarrier(os.path.join(self.tmp, f'{self.root}{p:06}_barrier_filelock'), f'{p:06}_barrier')

    def test_two_participants_pass_rounds(self):
        a, b = self.barrier(), self.barrier()
        done = []

        def run(bar):
            for _ in range(5):
                bar(2)
            done.append(True)

        threads = [threading.Thread(target=run, args=(x,), daemon=True) for x in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        self.assertEqual(done, [True, True])
        self.assertTrue(os.path.exists(a.filelock_path))  # lock file stays after use

    def test_late_constructor_resets_a_live_round(self):
        first = self.barrier()
        waiter = threading.Thread(target=first, args=(2,), daemon=True)
        waiter.start()
        deadline = time.monotonic() + 5
        while first.num_enter != 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        self.assertEqual(first.num_enter, 1)
        self.assertTrue(waiter.is_alive())

        late = self.barrier()  # resets entered/exited/flag without the lock
        self.assertEqual((late.num_enter, late.num_exit, late.flag), (0, -1, True))
        waiter.join(5)
        self.assertFalse(waiter.is_alive(), 'the waiter should have been released without its peer')

        peer = threading.Thread(target=late, args=(2,), daemon=True)
        peer.start()
        peer.join(0.5)
        self.assertTrue(peer.is_alive(), 'the peer should hang: it waits for a drain that never comes')
        # Unstick it by hand so the test leaves no spinning thread.
        late._arr[1] = 2
        while late.num_enter != 1 and peer.is_alive():
            time.sleep(0.005)
        late._arr[2] = 1
        peer.join(5)
        self.assertFalse(peer.is_alive())


class CleanupTest(Case):

    def test_cleanup_deletes_a_live_job_and_its_exit_handler_deletes_the_next(self):
        pa, job_a = get_shm_prefix(['/a'], ['s3://x'], LEADER)
        clean_stale_shared_memory()  # no liveness check
        self.assertFalse(self.exists(pa, 'locals'))
        pb, job_b = get_shm_prefix(['/a'], ['s3://x'], LEADER)  # same dir: nothing to conflict with
        self.assertEqual(pb, pa)
        job_a.cleanup()  # job A exits normally: its exit handler unlinks by name
        self.assertFalse(self.exists(pb, 'locals'), "job A's exit removed job B's live registration")
        job_b.close()

    def test_cleanup_stops_at_the_first_gap(self):
        self.leak_locals(0, ['/x'])
        self.leak(2, 'barrier')
        clean_stale_shared_memory()
        self.assertFalse(self.exists(0, 'locals'))
        self.assertTrue(self.exists(2, 'barrier'))

    def test_cleanup_ignores_lock_files(self):
        self.lock_file(0)
        self.leak(0, 'barrier')
        clean_stale_shared_memory()
        self.assertFalse(self.exists(0, 'barrier'))
        self.assertTrue(os.path.exists(os.path.join(self.tmp, f'{self.root}000000_barrier_filelock')))


class AdapterTest(Case):
    """The adapter run as the harness runs it: a subprocess with a hand-built environment."""

    def env(self, rank=0, world_size=1, local_world_size=1, ops=None, dirs=None, **extra):
        env = {
            'PATH': '/usr/bin:/bin',
            'PYTHONDONTWRITEBYTECODE': '1',
            'SHMSTRESS_ROLE': 'rank',
            'SHMSTRESS_JOB': '0',
            'SHMSTRESS_JOB_KEY': 'job0',
            'SHMSTRESS_RANK': str(rank),
            'RANK': str(rank),
            'SHMSTRESS_WORLD_SIZE': str(world_size),
            'WORLD_SIZE': str(world_size),
            'SHMSTRESS_LOCAL_RANK': str(rank % local_world_size),
            'LOCAL_RANK': str(rank % local_world_size),
            'SHMSTRESS_LOCAL_WORLD_SIZE': str(local_world_size),
            'LOCAL_WORLD_SIZE': str(local_world_size),
            'SHMSTRESS_DIRS': json.dumps(dirs if dirs is not None else [{'path': '/data/0', 'remote': True}]),
            'SHMSTRESS_OPS': json.dumps(ops if ops is not None else {}),
            'SHMSTRESS_SEED': str(1000 + rank),
            'SHMSTRESS_ROOT': self.root,
            'SHMSTRESS_LOCK_DIR': self.tmp,
            'TMPDIR': self.tmp,
            'SHMSTRESS_EVENTS': self.events_path,
            'SHMSTRESS_STREAMING_PATH': HERE,
            'SHMSTRESS_ACQUIRE_TIMEOUT_MS': '5000',
            'SHMSTRESS_BARRIER_TIMEOUT_MS': '3000',
        }
        env.update(extra)
        return env

    def setUp(self):
        super().setUp()
        self.events_path = os.path.join(self.tmp, 'history.jsonl')
        self.procs = []

    def tearDown(self):
        for proc in self.procs:  # only the processes this test started, by their own handle
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        super().tearDown()

    def start(self, env, events_fd=None):
        cmd = [PYTHON, ADAPTER, 'worker']
        fds = ()
        if events_fd is not None:
            env = dict(env, SHMSTRESS_EVENTS_FD=str(events_fd))
            fds = (events_fd,)
        proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=fds)
        self.procs.append(proc)
        return proc

    def finish(self, proc, timeout=30):
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            self.fail(f'adapter pid {proc.pid} hung; stderr: {err.decode(errors="replace")}')
        return proc.returncode, err.decode(errors='replace')

    def events(self):
        with open(self.events_path, 'rb') as f:
            raw = f.read()
        self.assertTrue(raw.endswith(b'\n'))
        out = []
        for line in raw.split(b'\n')[:-1]:
            self.assertLessEqual(len(line) + 1, 4096)
            e = json.loads(line)
            for key in ('t', 'type', 'pid', 'job', 'rank', 'local_rank'):
                self.assertIn(key, e, line)
            self.assertIsInstance(e['t'], int)
            out.append(e)
        return out

    def check_pairs(self, events):
        """Every invoke is closed by exactly one ok/fail of the same op and id, later, same pid."""
        ops = {}
        for e in events:
            if e['type'] == 'invoke':
                key = (e['pid'], e['id'])
                self.assertNotIn(key, ops, f'duplicate id {key}')
                self.assertIsInstance(e['args'], dict)
                ops[key] = {'invoke': e, 'done': None}
            elif e['type'] in ('ok', 'fail'):
                key = (e['pid'], e['id'])
                self.assertIn(key, ops, f'{e["type"]} without invoke: {e}')
                self.assertIsNone(ops[key]['done'], f'closed twice: {e}')
                self.assertEqual(ops[key]['invoke']['op'], e['op'])
                self.assertGreaterEqual(e['t'], ops[key]['invoke']['t'])
                if e['type'] == 'ok':
                    self.assertIsInstance(e['value'], dict)
                else:
                    self.assertEqual(set(e['error']), {'code', 'message', 'errno'})
                ops[key]['done'] = e
        for key, op in ops.items():
            self.assertIsNotNone(op['done'], f'open invoke {key}')
        return [(op['invoke']['op'], op['done']['type'], op['done'].get('value'), op['done'].get('error'))
                for op in ops.values()]

    def test_one_job_one_rank_full_workload(self):
        ops = {'acquire': True, 'rounds': 2, 'round_jitter_ms': [0, 2], 'hold_ms': [0, 1], 'release': True,
               'segments': ['shard_states'], 'clean_after': True, 'start_jitter_ms': [0, 3]}
        fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            rc, err = self.finish(self.start(self.env(ops=ops), events_fd=fd))
        finally:
            os.close(fd)
        self.assertEqual(rc, 0, err)
        events = self.events()
        # Protocol 2: the process says who it is first (start), then what the subject is.
        self.assertEqual(events[0]['type'], 'start')
        self.assertEqual(events[0]['role'], 'rank')
        events = events[1:]
        self.assertEqual(events[0]['type'], 'subject')
        self.assertIs(events[0]['available'], True)
        self.assertEqual(events[0]['distributed'], 'none')
        done = self.check_pairs(events)
        self.assertEqual([(op, kind) for op, kind, _, _ in done],
                         [('acquire', 'ok'), ('segment', 'ok'), ('barrier_attach', 'ok'), ('barrier', 'ok'),
                          ('barrier', 'ok'), ('barrier_detach', 'ok'), ('witness', 'ok'), ('release', 'ok'),
                          ('clean', 'ok')])
        acquire = done[0][2]
        self.assertEqual(acquire, {'prefix': 0, 'present': [f'/{self.root}000000_locals']})
        self.assertEqual(done[1][2]['name'], f'/{self.root}000000_shard_states')
        attach = done[2][2]
        self.assertEqual((attach['created'], attach['lock']),
                         (True, os.path.join(self.tmp, f'{self.root}000000_barrier_filelock')))
        self.assertIsInstance(attach['ino'], int)
        self.assertEqual([d[2] for d in done[3:5]], [{'round': 0}, {'round': 1}])
        invokes = [e for e in events if e['type'] == 'invoke']
        self.assertEqual([e['args'] for e in invokes if e['op'] == 'barrier'], [{'round': 0}, {'round': 1}])
        witness = done[6][2]['segments']
        self.assertEqual([(x['name'], x['ino']) for x in witness], [(done[1][2]['name'], done[1][2]['ino'])])
        self.assertEqual(sorted(done[8][2]['removed']),
                         sorted(f'/{self.root}000000_{k}' for k in ('locals', 'barrier', 'shard_states')))
        fds = [e for e in events if e['type'] == 'fds']
        self.assertEqual(len(fds), 1)
        self.assertGreater(fds[0]['count'], 3)
        ok_acquire = next(i for i, e in enumerate(events) if e['type'] == 'ok' and e['op'] == 'acquire')
        self.assertEqual(events[ok_acquire + 1]['type'], 'fds')
        self.assertEqual(shm_names(self.root), [])

    def run_one_rank(self, ops, dirs):
        rc, err = self.finish(self.start(self.env(ops=ops, dirs=dirs)))
        events = self.events()
        return rc, err, events, self.check_pairs([e for e in events if e['type'] in ('invoke', 'ok', 'fail')])

    def test_two_datasets_with_a_clean_between_share_prefix_0_and_the_second_epoch_fails_file_exists(self):
        # #767's script: train built, clean_stale_shared_memory(), val built; then the epochs. The clean
        # unlinks the first dataset's live locals, so the second registers prefix 0 too, and its epoch
        # meets the first one's epoch_shape (created without an exit handler): File exists.
        ops = {'datasets': 2, 'clean_between': True, 'rounds': 0,
               'segments': ['shard_states', 'epoch_shape', 'epoch_data']}
        rc, err, events, done = self.run_one_rank(ops, [{'path': '/data/trainval', 'remote': False}])
        self.assertEqual(rc, 1, err)
        invokes = [e for e in events if e['type'] == 'invoke']
        self.assertEqual([(e['op'], e['args'].get('dataset')) for e in invokes],
                         [('acquire', 0), ('segment', 0), ('clean', None), ('acquire', 1), ('segment', 1),
                          ('segment', 0), ('segment', 0), ('segment', 1), ('witness', 1), ('release', 1),
                          ('witness', 0), ('release', 0)])
        self.assertEqual([v['prefix'] for op, _, v, _ in done if op == 'acquire'], [0, 0])
        removed = done[2][2]['removed']
        self.assertIn(f'/{self.root}000000_locals', removed)
        self.assertIn(f'/{self.root}000000_shard_states', removed)
        op, kind, _, error = done[7]
        self.assertEqual((op, kind, error['code']), ('segment', 'fail', 'file-exists'))
        self.assertIn(f"File exists: '/{self.root}000000_epoch_shape'", error['message'])
        # The first failure ends the second epoch: its epoch_data is never attempted.
        self.assertEqual([e['args']['name'] for e in invokes if e['op'] == 'segment' and e['args']['dataset'] == 1],
                         [f'/{self.root}000000_shard_states', f'/{self.root}000000_epoch_shape'])
        self.assertEqual([d[1] for d in done[8:]], ['ok'] * 4)

    def test_two_datasets_without_a_clean_get_their_own_prefixes_and_release_last_first(self):
        ops = {'datasets': 2, 'rounds': 1, 'segments': ['shard_states', 'epoch_shape']}
        rc, err, events, done = self.run_one_rank(ops, [{'path': '/data/trainval', 'remote': False}])
        self.assertEqual(rc, 0, err)
        self.assertEqual([v['prefix'] for op, _, v, _ in done if op == 'acquire'], [0, 1])
        self.assertEqual([(op, v.get('name')) for op, _, v, _ in done if op == 'segment'],
                         [('segment', f'/{self.root}000000_shard_states'),
                          ('segment', f'/{self.root}000001_shard_states'),
                          ('segment', f'/{self.root}000000_epoch_shape'),
                          ('segment', f'/{self.root}000001_epoch_shape')])
        invokes = [e for e in events if e['type'] == 'invoke']
        self.assertEqual([e['args'] for e in invokes if e['op'] == 'release'],
                         [{'prefix': 1, 'dataset': 1}, {'prefix': 0, 'dataset': 0}])
        self.assertEqual([e['args'] for e in invokes if e['op'] == 'barrier_attach'], [{'num_procs': 1}])

    def two_rank_job(self, ops, group, rank_dirs=None, **extra):
        procs = [self.start(self.env(rank=r, world_size=2, local_world_size=2, ops=ops,
                                     dirs=(rank_dirs or {}).get(r), SHMSTRESS_PROCESS_GROUP=group, **extra))
                 for r in range(2)]
        return [self.finish(p) for p in procs]

    def check_two_ranks_pass_in_streaming_order(self, group):
        # No pause anywhere: the barrier is constructed, then the job's dist.barrier(), then used, as
        # StreamingDataset does; an adapter that skipped the dist.barrier() hung here by itself.
        ops = {'acquire': True, 'rounds': 3, 'release': True}
        for rc, err in self.two_rank_job(ops, group):
            self.assertEqual(rc, 0, err)
        events = self.events()
        self.assertEqual({e['distributed'] for e in events if e['type'] == 'subject'}, {group})
        done = self.check_pairs(events)
        self.assertEqual({v['prefix'] for op, _, v, _ in done if op == 'acquire'}, {0})
        self.assertEqual(sum(1 for op, kind, _, _ in done if op == 'barrier' and kind == 'ok'), 6)
        # Both constructors create-or-attach one segment through one lock file; exactly one created it
        # (the one whose tracker would unlink it, F6), both name the same lock (F21's evidence reads it).
        attached = [v for op, _, v, _ in done if op == 'barrier_attach']
        self.assertEqual(sorted(v['created'] for v in attached), [False, True])
        self.assertEqual(len({(v['dev'], v['ino'], v['lock']) for v in attached}), 1)
        self.assertTrue(attached[0]['lock'].endswith(f'/{self.root}000000_barrier_filelock'), attached[0])

    def test_two_ranks_with_the_emulated_process_group(self):
        self.check_two_ranks_pass_in_streaming_order('emulated')

    def test_a_peer_that_is_gone_breaks_the_emulated_group_barrier(self):
        # Rank 1 fails at once (duplicate local dirs) and exits; rank 0's dist.barrier() inside
        # get_shm_prefix then fails like gloo's: "Connection closed by peer", code broken.
        dup = [{'path': '/d', 'remote': True}, {'path': '/d', 'remote': True}]
        (rc0, err0), (rc1, err1) = self.two_rank_job({'acquire': True}, 'emulated', rank_dirs={1: dup})
        self.assertEqual((rc0, rc1), (1, 1), err0 + err1)
        done = self.check_pairs(self.events())
        self.assertEqual(sorted(e['code'] for _, kind, _, e in done if kind == 'fail'), ['broken', 'in-use'])

    def test_a_rank_that_never_joins_fails_the_group_with_timeout(self):
        env = self.env(rank=0, world_size=2, local_world_size=2, ops={'acquire': True},
                       SHMSTRESS_PROCESS_GROUP='emulated', SHMSTRESS_ACQUIRE_TIMEOUT_MS='300')
        rc, err = self.finish(self.start(env))
        self.assertEqual(rc, 1, err)
        done = self.check_pairs(self.events())
        self.assertEqual([(op, kind, e['code']) for op, kind, _, e in done], [('acquire', 'fail', 'timeout')])

    @unittest.skipUnless(HAVE_TORCH, 'torch.distributed not importable (scripts/setup installs python3-torch)')
    def test_two_ranks_with_a_real_gloo_group(self):
        self.check_two_ranks_pass_in_streaming_order('gloo')

    @unittest.skipUnless(HAVE_TORCH, 'torch.distributed not importable (scripts/setup installs python3-torch)')
    def test_a_taken_port_moves_the_store_and_peers_follow_the_published_one(self):
        # Another trial (or anything) listens on the job's first candidate port: rank 0 must move on
        # to the next candidate and rank 1 must find it through the trial directory, not by guessing.
        adapter = load_adapter()
        key = f'{self.tmp}/job0'
        blocker = socket.socket()
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            blocker.bind(('127.0.0.1', adapter.candidate_port(key, 0)))
            blocker.listen()
        except OSError:
            blocker.close()
            self.skipTest('the first candidate port is already taken here')
        try:
            for rc, err in self.two_rank_job({'acquire': True, 'rounds': 1}, 'gloo'):
                self.assertEqual(rc, 0, err)
        finally:
            blocker.close()
        with open(os.path.join(self.tmp, 'pg.job0.port'), encoding='ascii') as f:
            port = int(f.read())
        self.assertEqual(port, adapter.candidate_port(key, 1))
        done = self.check_pairs(self.events())
        self.assertEqual(sum(1 for op, kind, _, _ in done if op == 'barrier' and kind == 'ok'), 2)

    def test_group_setup_failure_is_classified_not_silent(self):
        env = self.env(rank=1, world_size=2, local_world_size=2, ops={'acquire': True},
                       SHMSTRESS_PROCESS_GROUP='gloo' if HAVE_TORCH else 'emulated',
                       SHMSTRESS_ACQUIRE_TIMEOUT_MS='300')
        rc, err = self.finish(self.start(env))  # rank 0 never starts
        self.assertEqual(rc, 1, err)
        done = self.check_pairs(self.events())
        self.assertEqual([(op, kind, e['code']) for op, kind, _, e in done], [('acquire', 'fail', 'timeout')])

    def test_a_failed_acquire_is_classified_and_exits_1(self):
        self.leak_locals(0, ['/data/0'])  # a killed job's registration for our dir
        rc, err = self.finish(self.start(self.env(ops={'acquire': True, 'rounds': 1})))
        self.assertEqual(rc, 1, err)
        done = self.check_pairs(self.events())
        self.assertEqual(len(done), 1)
        op, kind, _, error = done[0]
        self.assertEqual((op, kind, error['code'], error['errno']), ('acquire', 'fail', 'in-use', 0))
        self.assertIn('Reused local directory', error['message'])

    def test_cleanup_role_reports_what_it_removed(self):
        self.leak_locals(0, ['/x'])
        self.leak(0, 'barrier')
        self.leak(1, 'epoch_data')
        self.leak(3, 'resume')  # above the gap: stays
        env = self.env(SHMSTRESS_ROLE='cleanup', SHMSTRESS_JOB='-1', SHMSTRESS_RANK='-1')
        del env['SHMSTRESS_OPS']
        rc, err = self.finish(self.start(env))
        self.assertEqual(rc, 0, err)
        done = self.check_pairs(self.events())
        self.assertEqual([(op, kind) for op, kind, _, _ in done], [('clean', 'ok')])
        self.assertEqual(sorted(done[0][2]['removed']),
                         sorted(f'/{self.root}{n}' for n in ('000000_locals', '000000_barrier', '000001_epoch_data')))
        self.assertEqual(shm_names(self.root), [f'{self.root}000003_resume'])

    def test_missing_package_is_reported_unavailable_with_exit_3(self):
        if subprocess.run([PYTHON, '-c', 'import streaming'], capture_output=True, cwd=self.tmp,
                          check=False).returncode == 0:
            self.skipTest('a streaming package is installed for /usr/bin/python3')
        empty = os.path.join(self.tmp, 'empty')
        os.mkdir(empty)
        rc, err = self.finish(self.start(self.env(SHMSTRESS_STREAMING_PATH=empty, ops={'acquire': True})))
        self.assertEqual(rc, 3, err)
        events = [e for e in self.events() if e['type'] != 'start']
        self.assertEqual(len(events), 1)
        self.assertEqual(events[0]['type'], 'subject')
        self.assertIs(events[0]['available'], False)
        self.assertIn('streaming', events[0]['reason'])

    def test_bad_environment_exits_2(self):
        rc, _ = self.finish(self.start(self.env(SHMSTRESS_OPS='{not json')))
        self.assertEqual(rc, 2)

    def test_gloo_asked_for_by_name_without_torch_exits_2(self):
        # A torch that cannot be imported, ahead of Debian's on the path.
        fake = os.path.join(self.tmp, 'notorch')
        os.makedirs(os.path.join(fake, 'torch'))
        with open(os.path.join(fake, 'torch', '__init__.py'), 'w', encoding='ascii') as f:
            f.write('raise ImportError("no torch here")\n')
        env = self.env(rank=0, world_size=2, local_world_size=2, PYTHONPATH=fake,
                       SHMSTRESS_PROCESS_GROUP='gloo')
        rc, err = self.finish(self.start(env))
        self.assertEqual(rc, 2, err)
        self.assertIn('gloo', err)
        self.assertIn('not importable', err)

    def no_torch(self):
        """A PYTHONPATH whose torch cannot be imported, ahead of Debian's."""
        fake = os.path.join(self.tmp, 'notorch')
        if not os.path.isdir(fake):
            os.makedirs(os.path.join(fake, 'torch'))
            with open(os.path.join(fake, 'torch', '__init__.py'), 'w', encoding='ascii') as f:
                f.write('raise ImportError("no torch here")\n')
        return fake

    def test_an_unknown_process_group_exits_2_naming_the_modes(self):
        env = self.env(rank=0, world_size=2, local_world_size=2, SHMSTRESS_PROCESS_GROUP='nccl')
        rc, err = self.finish(self.start(env))
        self.assertEqual(rc, 2, err)
        self.assertIn("SHMSTRESS_PROCESS_GROUP='nccl' is not one of auto, gloo, emulated, nccl-like, none", err)

    def test_nccl_like_timeout_not_twice_the_deadline_exits_2(self):
        # acquire deadline 5000 ms, barrier 3000 ms: the collective must wait at least 10000 ms.
        for value in ('9999', 'soon', '-1'):
            env = self.env(rank=0, world_size=2, local_world_size=2, SHMSTRESS_PROCESS_GROUP='nccl-like',
                           SHMSTRESS_NCCL_TIMEOUT_MS=value)
            rc, err = self.finish(self.start(env))
            self.assertEqual(rc, 2, err)
            self.assertIn(f"SHMSTRESS_NCCL_TIMEOUT_MS='{value}' must be a number of ms at least twice the op "
                          f"deadline (5000 ms", err)

    def test_nccl_like_without_torch_or_emulated_group_exits_2(self):
        # The stand-in without its emulated group, as the real package is: nothing to build it on.
        pkg = os.path.join(self.tmp, 'pkg')
        shutil.copytree(os.path.join(HERE, 'streaming'), os.path.join(pkg, 'streaming'))
        with open(os.path.join(pkg, 'streaming', 'base', 'distributed.py'), 'a', encoding='ascii') as f:
            f.write('\ndel init_emulated_group\n')
        env = self.env(rank=0, world_size=2, local_world_size=2, PYTHONPATH=self.no_torch(),
                       SHMSTRESS_STREAMING_PATH=pkg, SHMSTRESS_PROCESS_GROUP='nccl-like')
        rc, err = self.finish(self.start(env))
        self.assertEqual(rc, 2, err)
        self.assertIn('nccl-like: torch.distributed (gloo) is not importable and this subject has no emulated '
                      'group', err)

    def check_nccl_like_holds_a_dead_peer_until_its_timeout(self, transport, **extra):
        # Rank 1 fails at once (duplicate local dirs) and exits. Under gloo or emulated rank 0's
        # dist.barrier() inside get_shm_prefix fails "broken" at once (the test above); under
        # nccl-like it waits the whole NCCL timeout, then fails "timeout".
        dup = [{'path': '/d', 'remote': True}, {'path': '/d', 'remote': True}]
        # At least twice the deadline; the deadline is the group's rendezvous time, which two
        # interpreters importing torch on a loaded machine need whole seconds of.
        nccl_ms = 6000
        (rc0, err0), (rc1, err1) = self.two_rank_job(
            {'acquire': True}, 'nccl-like', rank_dirs={1: dup}, SHMSTRESS_ACQUIRE_TIMEOUT_MS='3000',
            SHMSTRESS_BARRIER_TIMEOUT_MS='1000', SHMSTRESS_NCCL_TIMEOUT_MS=str(nccl_ms), **extra)
        self.assertEqual((rc0, rc1), (1, 1), err0 + err1)
        events = self.events()
        subject = [e for e in events if e['type'] == 'subject']
        self.assertEqual({e['distributed'] for e in subject}, {'nccl-like'})
        self.assertTrue(all(f'{transport} carries the collectives' in e['reason'] for e in subject), subject)
        self.check_pairs(events)
        invokes = {(e['pid'], e['id']): e for e in events if e['type'] == 'invoke'}
        fails = sorted((e for e in events if e['type'] == 'fail'), key=lambda e: e['error']['code'])
        self.assertEqual([(e['op'], e['error']['code']) for e in fails], [('acquire', 'in-use'), ('acquire', 'timeout')])
        held = fails[1]
        took_ms = (held['t'] - invokes[(held['pid'], held['id'])]['t']) / 1e6
        self.assertGreaterEqual(took_ms, nccl_ms)
        self.assertLess(took_ms, nccl_ms + 5000)
        self.assertIn('[nccl-like] barrier: Timed out after 6000 ms', held['error']['message'])

    @unittest.skipUnless(HAVE_TORCH, 'torch.distributed not importable (scripts/setup installs python3-torch)')
    def test_a_peer_that_is_gone_hangs_the_nccl_like_barrier_until_its_timeout_on_gloo(self):
        self.check_nccl_like_holds_a_dead_peer_until_its_timeout('gloo')

    def test_a_peer_that_is_gone_hangs_the_nccl_like_barrier_until_its_timeout_on_emulated(self):
        self.check_nccl_like_holds_a_dead_peer_until_its_timeout('emulated', PYTHONPATH=self.no_torch())

    @unittest.skipUnless(HAVE_TORCH, 'torch.distributed not importable (scripts/setup installs python3-torch)')
    def test_two_ranks_with_the_nccl_like_group(self):
        self.check_two_ranks_pass_in_streaming_order('nccl-like')

    def test_a_rank_that_never_joins_the_nccl_like_group_fails_within_the_acquire_deadline(self):
        # Rank 0 alone: the rendezvous keeps the acquire deadline (on gloo, rank 0 opened the store
        # and nobody came); only collectives wait NCCL's 30 minutes.
        for extra, said in (({}, 'only 1 of 2 ranks joined'), ({'PYTHONPATH': self.no_torch()}, 'Timed out')):
            if not extra and not HAVE_TORCH:
                continue
            if os.path.exists(self.events_path):
                os.unlink(self.events_path)
            env = self.env(rank=0, world_size=2, local_world_size=2, ops={'acquire': True},
                           SHMSTRESS_PROCESS_GROUP='nccl-like', SHMSTRESS_ACQUIRE_TIMEOUT_MS='1000',
                           SHMSTRESS_BARRIER_TIMEOUT_MS='1000', **extra)
            rc, err = self.finish(self.start(env), timeout=30)
            self.assertEqual(rc, 1, err)
            done = self.check_pairs(self.events())
            self.assertEqual([(op, kind, e['code']) for op, kind, _, e in done], [('acquire', 'fail', 'timeout')])
            self.assertIn(said, done[0][3]['message'])

    def test_ops_carry_the_main_threads_cpu_wait_read_inside_the_op(self):
        rc, err = self.finish(self.start(self.env(ops={'acquire': True})))
        self.assertEqual(rc, 0, err)
        ops = [e for e in self.events() if e['type'] in ('invoke', 'ok', 'fail')]
        self.assertTrue(ops)
        last = -1
        for e in ops:
            self.assertIsInstance(e.get('cpu_wait_ns'), int, e)
            self.assertGreaterEqual(e['cpu_wait_ns'], last, 'cumulative: never goes down')
            last = e['cpu_wait_ns']


class TrackerTest(Case):
    """CPython's resource tracker, a child of the process that created a segment, outlives it."""

    SCRIPT = (
        'import os, signal, sys\n'
        'sys.path.insert(0, sys.argv[1])\n'
        'from streaming.base.shared.memory import SharedMemory\n'
        'shm = SharedMemory("000000_epoch_shape", True, 64, auto_cleanup=False)\n'
        'if sys.argv[2] == "tree":\n'
        '    os.killpg(0, signal.SIGKILL)  # the creator and its tracker at once: a whole-job kill\n'
        'os.kill(os.getpid(), signal.SIGKILL)\n')

    def run_and_kill(self, whole_tree):
        env = dict(os.environ, SHMSTRESS_ROOT=self.root, PYTHONDONTWRITEBYTECODE='1')
        proc = subprocess.Popen([PYTHON, '-c', self.SCRIPT, HERE, 'tree' if whole_tree else 'pid'], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        proc.communicate(timeout=30)
        deadline = time.monotonic() + 5
        while self.exists(0, 'epoch_shape') and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.exists(0, 'epoch_shape')

    def test_killing_only_the_creator_lets_its_tracker_unlink_the_segment(self):
        self.assertFalse(self.run_and_kill(whole_tree=False))

    def test_killing_the_whole_tree_leaks_the_segment(self):
        self.assertTrue(self.run_and_kill(whole_tree=True))


class VariantTest(Case):
    """Upstream's fixes of the non-leader's check, as switchable variants."""

    def leader_registers_late(self, delay, dirs=('/mine',)):
        def register():
            time.sleep(delay)
            self.leak_locals(0, list(dirs))
        return threading.Thread(target=register, daemon=True)

    def follower(self):
        """A non-leader whose walk found prefix 0 free (before anyone registered it)."""
        saved = prefix_mod._walk_retrying
        prefix_mod._walk_retrying = lambda *a: 0
        try:
            return get_shm_prefix(['/mine'], ['s3://x'], world(1, 2, 2), retry=20)
        finally:
            prefix_mod._walk_retrying = saved

    def test_v014_fails_when_the_leaders_record_comes_late(self):
        t = self.leader_registers_late(0.05)
        t.start()
        with self.assertRaisesRegex(RuntimeError, 'not registered by local leader'):
            self.follower()
        t.join()

    def test_pr966_waits_for_the_leaders_record(self):
        os.environ['SHMSTRESS_STANDIN_VARIANT'] = 'pr966'
        t = self.leader_registers_late(0.05)
        t.start()
        p, shm = self.follower()
        t.join()
        self.assertEqual(p, 0)
        shm.close()

    def test_pr966_still_fails_on_another_jobs_record(self):
        os.environ['SHMSTRESS_STANDIN_VARIANT'] = 'pr966'
        self.leak_locals(0, ['/other'])
        with self.assertRaisesRegex(RuntimeError, 'registered does not match local leader'):
            self.follower()

    def test_pr985_waits_until_the_record_is_ours(self):
        os.environ['SHMSTRESS_STANDIN_VARIANT'] = 'pr985'
        self.leak(0, 'locals', size=64)  # there, but not written yet (length 0 record)

        def write_later():
            time.sleep(0.05)
            record = _pack_locals(['/mine'], 0)
            with open(os.path.join(SHM, f'{self.root}000000_locals'), 'r+b') as f:
                f.write(record)

        t = threading.Thread(target=write_later, daemon=True)
        t.start()
        p, shm = self.follower()
        t.join()
        self.assertEqual(p, 0)
        shm.close()

    def test_neither_retries_an_empty_segment(self):
        # The leader is between shm_open and ftruncate: the name exists with length 0.
        for variant in ('pr966', 'pr985'):
            os.environ['SHMSTRESS_STANDIN_VARIANT'] = variant
            os.close(os.open(os.path.join(SHM, f'{self.root}000000_locals'), os.O_CREAT | os.O_RDWR, 0o600))
            with self.assertRaisesRegex(ValueError, 'cannot mmap an empty file'):
                self.follower()
            os.unlink(os.path.join(SHM, f'{self.root}000000_locals'))


class SpawnPickleTest(Case):

    def test_a_spawned_loader_attaches_the_rank_barrier_by_name_without_reset_and_fails_when_it_is_gone(self):
        # What a spawn-started DataLoader worker of the real package does with the rank's SharedBarrier:
        # unpickled without its lock, its segment attached by name (no constructor, no reset), the lock
        # re-created from filelock_path; once the name is gone, the attach fails (F6 then F20).
        adapter = load_adapter()
        lock = os.path.join(self.tmp, f'{self.root}000000_barrier_filelock')
        barrier = SharedBarrier(lock, '000000_barrier')
        barrier._arr[0] = 5  # pylint: disable=protected-access
        ds = adapter.LoaderDataset(barrier, lock, '000000_barrier', 1, {})
        state = ds.__getstate__()
        self.assertIsNone(state['barrier'])
        self.assertTrue(hasattr(barrier, 'lock'))  # the rank's own object keeps its lock
        copy = adapter.LoaderDataset.__new__(adapter.LoaderDataset)
        copy.__dict__.update(state)
        worker_barrier = copy._unpickled_barrier()  # pylint: disable=protected-access
        self.assertEqual(worker_barrier.num_enter, 5)
        self.assertIs(type(worker_barrier.lock), type(barrier.lock))
        self.assertEqual(worker_barrier.lock.path, lock)
        self.assertEqual(adapter.barrier_identity(worker_barrier)['ino'], adapter.barrier_identity(barrier)['ino'])
        worker_barrier._arr.shm.close()  # pylint: disable=protected-access
        os.unlink(os.path.join(SHM, f'{self.root}000000_barrier'))
        with self.assertRaises(FileNotFoundError):
            copy._unpickled_barrier()  # pylint: disable=protected-access


class ProbeTest(Case):

    def test_cleanup_probes_every_kind_by_creating_it(self):
        created = []
        import _posixshmem  # pylint: disable=import-outside-toplevel
        original = _posixshmem.shm_open

        def shm_open(path, flags, *a, **kw):
            fd = original(path, flags, *a, **kw)
            if flags & os.O_CREAT:
                created.append(path)
            return fd

        _posixshmem.shm_open = shm_open
        try:
            clean_stale_shared_memory()
        finally:
            _posixshmem.shm_open = original
        self.assertEqual(created, [f'/{self.root}000000_{k}' for k in SHM_TO_CLEAN])
        self.assertEqual(shm_names(self.root), [])

    def test_cleanup_skips_a_segment_it_may_not_open_and_goes_on(self):
        self.leak(0, 'locals')
        self.leak(0, 'barrier')
        real_open = SharedMemoryCPython.__init__

        def guarded(obj, name=None, create=False, size=0):
            if not create and name.endswith('000000_locals'):
                raise PermissionError(13, 'Permission denied', name)
            real_open(obj, name, create, size)

        SharedMemoryCPython.__init__ = guarded
        try:
            clean_stale_shared_memory()
        finally:
            SharedMemoryCPython.__init__ = real_open
        self.assertTrue(self.exists(0, 'locals'))
        self.assertFalse(self.exists(0, 'barrier'))

    @unittest.skipUnless(os.geteuid() == 0, 'needs root to run the cleanup as another uid')
    def test_a_users_cleanup_stops_at_another_users_prefix_and_never_reaches_its_own_leaks(self):
        # F13's non-root half, with a real EACCES: root's 0600 segment holds prefix 0, uid 65534's own
        # dead job leaked prefix 1. 65534's clean_stale_shared_memory() may not open prefix 0, so
        # nothing "leaked" there and it stops: its own leak at prefix 1 stays. Root (modes ignored)
        # removes both, the other user's included (foreign-segment.toml).
        self.leak(0, 'locals')
        self.leak(1, 'locals')
        os.chown(os.path.join(SHM, f'{self.root}000001_locals'), 65534, 65534)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setgid(65534)
                os.setuid(65534)
                clean_stale_shared_memory()
                code = 0
            finally:
                os._exit(code)  # pylint: disable=protected-access
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertTrue(self.exists(0, 'locals'))
        self.assertTrue(self.exists(1, 'locals'))
        self.assertEqual(shm_names(self.root), [f'{self.root}000000_locals', f'{self.root}000001_locals'])
        clean_stale_shared_memory()
        self.assertEqual(shm_names(self.root), [])


class ClassifyTest(unittest.TestCase):
    """The protocol's error codes, which the checkers' explanation table reads (ops.explained)."""

    def test_a_ctrl_c_is_interrupted_also_where_libtorch_rewrapped_it_as_a_runtime_error(self):
        adapter = load_adapter()
        self.assertEqual(adapter.classify(KeyboardInterrupt())['code'], 'interrupted')
        # What a DataLoader's iterate raised when SIGINT landed inside torch's C++ (measured on
        # report-781-ctrl-c under the emulated group: ops.explained called it an unexplained io).
        err = adapter.classify(RuntimeError('KeyboardInterrupt: <EMPTY MESSAGE>'))
        self.assertEqual(err, {'code': 'interrupted', 'message': 'RuntimeError: KeyboardInterrupt: <EMPTY MESSAGE>',
                               'errno': 0})
        self.assertEqual(adapter.classify(RuntimeError('DataLoader worker exited unexpectedly'))['code'], 'io')


class EventLinesTest(unittest.TestCase):
    """Nothing is dropped to fit PIPE_BUF: long results are split over continuation lines
    (subjects/_common/shmstress_protocol.py, which the adapters write events with)."""

    @staticmethod
    def merge(lines):
        whole = {}
        for raw in lines:
            ev = json.loads(raw)
            ev.pop('continues', None)
            for key, val in ev.items():
                if isinstance(val, dict) and isinstance(whole.get(key), dict):
                    for k, v in val.items():
                        old = whole[key].get(k)
                        whole[key][k] = old + v if isinstance(old, list) and isinstance(v, list) else v
                else:
                    whole[key] = val
        return whole

    def test_a_clean_that_removed_many_names_is_split_and_merges_back_whole(self):
        protocol = load_protocol()
        removed = [f'/sstest.{i:06}_shard_states_with_a_long_name' for i in range(400)]
        kept = [f'/kept{i}' for i in range(50)]
        event = {'t': 7, 'type': 'ok', 'op': 'clean', 'id': 1, 'pid': 9, 'job': 0, 'rank': 0,
                 'value': {'removed': removed, 'kept': kept, 'skipped': [], 'n': 3}}
        lines = protocol.lines(dict(event))
        self.assertGreater(len(lines), 1)
        for n, raw in enumerate(lines):
            self.assertLessEqual(len(raw), protocol.PIPE_BUF)
            ev = json.loads(raw)
            self.assertEqual(ev.get('continues', False), n < len(lines) - 1)
            self.assertEqual((ev['t'], ev['op'], ev['id'], ev['pid']), (7, 'clean', 1, 9))
        whole = self.merge(lines)
        self.assertEqual(whole['value']['removed'], removed)
        self.assertEqual(whole['value']['kept'], kept)
        self.assertEqual(whole['value']['n'], 3)
        self.assertNotIn('truncated', whole)

    def test_a_single_name_longer_than_a_line_is_cut_and_marked(self):
        protocol = load_protocol()
        event = {'t': 1, 'type': 'ok', 'op': 'clean', 'id': 2, 'pid': 9, 'job': 0, 'rank': 0,
                 'value': {'removed': ['/a', 'x' * 5000, '/b'], 'kept': []}}
        lines = protocol.lines(event)
        whole = self.merge(lines)
        self.assertTrue(whole.get('truncated'))
        self.assertEqual(whole['value']['removed'][0], '/a')
        self.assertEqual(whole['value']['removed'][2], '/b')

    def test_lines_after_a_cut_element_still_fit(self):
        protocol = load_protocol()
        rest = [f'/sstest.{i:06}_shard_states_with_a_long_name' for i in range(300)]
        event = {'t': 1, 'type': 'ok', 'op': 'clean', 'id': 3, 'pid': 9, 'job': 0, 'rank': 0,
                 'value': {'removed': ['x' * 5000] + rest, 'kept': []}}
        lines = protocol.lines(event)
        for raw in lines:
            self.assertLessEqual(len(raw), protocol.PIPE_BUF)
        whole = self.merge(lines)
        self.assertTrue(whole.get('truncated'))
        self.assertEqual(whole['value']['removed'][1:], rest)

    def test_a_short_event_is_one_line(self):
        protocol = load_protocol()
        lines = protocol.lines({'t': 1, 'type': 'ok', 'op': 'acquire', 'value': {'prefix': 0}})
        self.assertEqual(len(lines), 1)
        self.assertNotIn('continues', json.loads(lines[0]))

    def test_appended_lines_never_cross_a_page_and_each_parses_alone(self):
        # A SIGKILL stops write(2) between the pages of a regular file: a line must lie in one page.
        protocol = load_protocol()
        page = protocol.PAGE
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'history.jsonl')
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                for i in range(300):
                    for raw in protocol.lines({'t': i, 'type': 'fds', 'pid': 9, 'job': 0, 'rank': 0,
                                               'count': i, 'pad': 'x' * (i * 37 % 300)}):
                        protocol.append_line(fd, raw)
            finally:
                os.close(fd)
            data = open(path, 'rb').read()
        self.assertGreater(len(data), 4 * page)
        start, n = 0, 0
        while start < len(data):
            nl = data.index(b'\n', start)
            first = start + len(data[start:nl]) - len(data[start:nl].lstrip(b' '))
            self.assertEqual(first // page, nl // page, f'line {n} runs from {first} to {nl}')
            self.assertEqual(json.loads(data[start:nl])['count'], n)
            start, n = nl + 1, n + 1
        self.assertEqual(n, 300)


def tearDownModule():  # pylint: disable=invalid-name
    left = shm_names(ROOT_BASE)
    for n in left:
        os.unlink(os.path.join(SHM, n))
    if left:
        raise AssertionError(f'left in /dev/shm: {left}')


if __name__ == '__main__':
    unittest.main()
