"""subjects/joblib/adapter.py on its own: its environment checks and exit codes, how it names
errors and fits events in PIPE_BUF, that a forked child never logs as the rank, and one whole
pool against Debian's joblib (root: in a private /dev/shm, so it falls back to a temp dir)."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ADAPTER = os.path.join(ROOT, 'subjects', 'joblib', 'adapter.py')
PY = '/usr/bin/python3'

spec = importlib.util.spec_from_file_location('joblib_adapter', ADAPTER)
adapter = importlib.util.module_from_spec(spec)
spec.loader.exec_module(adapter)


def events(path):
    with open(path, encoding='utf-8') as f:
        return [json.loads(line) for line in f if line.strip()]


class Scratch(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='shmstress-joblib-test-')
        self.log = os.path.join(self.dir, 'history.jsonl')

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith('SHMSTRESS_')}
        env.update({'SHMSTRESS_EVENTS': self.log, 'SHMSTRESS_JOB': '0', 'SHMSTRESS_RANK': '0'})
        env.update(extra)
        return env


class Environment(Scratch):
    def test_wrong_argv_exits_2(self):
        self.assertEqual(subprocess.run([PY, ADAPTER], env=self.env(), capture_output=True).returncode, 2)

    def test_no_event_log_exits_2(self):
        env = self.env()
        del env['SHMSTRESS_EVENTS']
        r = subprocess.run([PY, ADAPTER, 'worker'], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn('no event log', r.stderr)

    def test_ops_that_are_not_an_object_exit_2(self):
        r = subprocess.run([PY, ADAPTER, 'worker'], env=self.env(SHMSTRESS_OPS='[1]'), capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn('SHMSTRESS_OPS must be an object', r.stderr)

    def test_a_missing_joblib_is_unavailable_exit_3(self):
        fake = os.path.join(self.dir, 'fake')
        os.mkdir(fake)
        with open(os.path.join(fake, 'joblib.py'), 'w', encoding='utf-8') as f:
            f.write('raise ImportError("no joblib here")\n')
        r = subprocess.run([PY, ADAPTER, 'worker'], env=self.env(PYTHONPATH=fake, SHMSTRESS_OPS='{}'),
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 3, r.stderr)
        (subject,) = events(self.log)
        self.assertEqual(subject['type'], 'subject')
        self.assertFalse(subject['available'])
        self.assertIn('no joblib here', subject['reason'])


class Naming(unittest.TestCase):
    def test_errors_get_protocol_codes(self):
        TerminatedWorkerError = type('TerminatedWorkerError', (Exception,), {})
        self.assertEqual(adapter.classify(TerminatedWorkerError('gone'))['code'], 'worker-died')
        self.assertEqual(adapter.classify(OSError(24, 'Too many open files'))['code'], 'exhausted')
        self.assertEqual(adapter.classify(OSError(28, 'No space left'))['code'], 'exhausted')
        self.assertEqual(adapter.classify(PermissionError(13, 'denied'))['code'], 'permission')
        self.assertEqual(adapter.classify(FileExistsError(17, 'exists'))['code'], 'exists')
        self.assertEqual(adapter.classify(OSError('Expected empty folder /x but got 1 files.'))['code'], 'not-empty')
        err = adapter.classify(ValueError('odd'))
        self.assertEqual(err, {'code': 'io', 'message': 'ValueError: odd', 'errno': 0})

    def test_a_long_event_is_cut_to_one_line_and_marked_truncated(self):
        line = adapter.fit_line({'t': 1, 'type': 'ok', 'op': 'remove', 'id': 1,
                                 'value': {'removed': ['/dev/shm/' + 'x' * 100] * 200}})
        self.assertLessEqual(len(line), adapter.PIPE_BUF)
        event = json.loads(line)
        self.assertTrue(event['value']['truncated'])
        self.assertGreater(len(event['value']['removed']), 0)


class ForkedChild(Scratch):
    def test_a_process_that_is_not_the_rank_never_logs_as_the_rank(self):
        os.environ['SHMSTRESS_EVENTS'] = self.log
        try:
            w = adapter.Worker(adapter.EventLog())
        finally:
            del os.environ['SHMSTRESS_EVENTS']
        w.emit('subject', available=True)
        w.pid = w.pid + 1  # as in a child forked from the rank that did not exec
        saved = os.dup(2)
        with open(os.devnull, 'wb') as devnull:
            os.dup2(devnull.fileno(), 2)
            try:
                w.emit('ok', op='remove', id=9)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
        self.assertEqual([e['type'] for e in events(self.log)], ['subject'])


@unittest.skipUnless(os.geteuid() == 0 and shutil.which('unshare'), 'needs root for a private /dev/shm')
class OnePool(Scratch):
    def test_a_pool_in_the_temp_dir_reports_its_folder_file_modes_and_removal(self):
        tmp = os.path.join(self.dir, 'tmp')
        os.mkdir(tmp)
        ops = json.dumps({'segments': ['data'], 'rounds': 1, 'round_jitter_ms': [100, 100]})
        # A 64 MiB /dev/shm of its own: joblib falls back to $TMPDIR, and loky's semaphores stay private.
        script = ('mount --make-rprivate / && mount -t tmpfs -o size=64m shmstress /dev/shm && '
                  f'exec {PY} {ADAPTER} worker')
        r = subprocess.run(['unshare', '-m', 'sh', '-c', script], env=self.env(SHMSTRESS_OPS=ops, TMPDIR=tmp),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        evs = events(self.log)
        oks = [e for e in evs if e['type'] == 'ok']
        by_op = {}
        for e in oks:
            by_op.setdefault(e['op'], []).append(e['value'])
        pool = by_op['pool'][0]
        self.assertEqual(len(pool['workers']) > 0, True)
        (folder,) = by_op['folder']
        self.assertFalse(folder['shared_mem'])
        self.assertTrue(folder['name'].startswith(tmp + '/joblib_memmapping_folder_'))
        (file,) = by_op['file']
        self.assertTrue(file['name'].startswith(folder['name'] + '/'))
        chmods = {c['name']: c['mode'] for c in by_op['chmod']}
        self.assertEqual(chmods[folder['name']], 0o700)
        self.assertEqual(chmods[file['name']], 0o600)
        removed = [n for v in by_op['remove'] for n in v['removed']]
        self.assertIn(folder['name'], removed)
        self.assertEqual(os.listdir(tmp), [])
        self.assertTrue(any(e['op'] == 'witness' and e['value']['segments'] for e in oks))


if __name__ == '__main__':
    unittest.main()
