"""The dashboard's alert-worthy panel queries compute what a user alerts on, checked by
`promtool test rules` over synthetic series, with no Prometheus server.

Run from the repository root (ctest: grafana.panel_queries, about 2 s):

    /usr/bin/python3 -m unittest discover -s tests/grafana -p test_panel_queries.py -v

The queries are read from reports/grafana/shmstress.json when the test runs (panel_tests.py puts
the variables in as Grafana does), so a change to a panel's query or thresholds is tested; the
series are what Prometheus holds of the metrics reports/prometheus.cc writes (names, labels, which
series a run has and which it leaves out), scraped from the three places docs/reports.md names; the
expected values are worked out by hand below, from the timeline.

The timeline (hours; Prometheus scrapes every source once an hour, at 0h, 1h, ... 80h):

- job "shmstress": a nightly of subject native in two shards, each pushing to the Pushgateway
  (group instance="shard-i-of-2", POST: the metric names a push carries replace the group's; a
  name with no sample in the push is kept as it was, and last_success is only pushed by a run
  that exited 0). Scenarios basic and kill-holder, 20 trials each per shard and night, invariants
  prefix.unique and cleanup.safety checked; a baseline knows one bucket (kill-holder's
  cleanup.safety).
    night 1 (pushed at 1h; shard 0 finished at 3540 s, shard 1 at 3570 s): both green, exit 0;
      the known bucket did not recur (not_recurred 1 each).
    night 2 (25h; 89940 s, 89970 s): shard 0: kill-holder cleanup.safety in 2 trials, known,
      exit 0; shard 1: basic prefix.unique in 3 trials, a new bucket, exit 1 (not_recurred 1).
    night 3 (49h; 176340 s, 176370 s): shard 0: basic cleanup.safety in 1 trial (new) and
      kill-holder cleanup.safety in 1 (known), exit 1; shard 1: no violation, exit 0
      (not_recurred 1). Its push has no triaged_violations_total sample, so the gateway keeps
      night 2's (basic prefix.unique new 3, known 0).
    no night 4: the gateway keeps night 3's values to the end.
- job "node": subject exec:/usr/bin/python3 subjects/streaming/adapter.py through node_exporter's
  textfile collector (instance ci-runner:9100; each run replaces the file, no baseline), scenario
  cleanup-while-live, 4 trials, the same two invariants:
    run A (written at 10h): inconclusive, no violation, exit 4;
    run B (30h): cleanup.safety in 3 trials (new), exit 1;
    run C (60h, finished at 215940 s): green, exit 0.
- job "shmstress-live": a --listen soak of native, scenario basic (instance 127.0.0.1:9464), in
  progress at 3h (5 trials) and 4h (12), finished at 5h (20 trials, exit 0, at 17990 s); its
  endpoint is down from 6h.
"""

import copy
import json
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import panel_tests as pt  # noqa: E402
import validate_dashboard as vd  # noqa: E402

DASHBOARD = os.path.join(vd.REPO, 'reports', 'grafana', 'shmstress.json')
INTERVAL = '1h'
LAST_HOUR = 80
NATIVE = 'native'
STREAMING = 'exec:/usr/bin/python3 subjects/streaming/adapter.py'
CHECKED = ['cleanup.safety', 'prefix.unique']

# --- what Prometheus holds ---------------------------------------------------------------------


def run(subject, scenarios, exit_code, finished, buckets, not_recurred=None):
    """A run's metric families as reports/prometheus.cc writes them, for the metrics the panels
    read: {name: {labels: value}}. scenarios: {scenario: (trials, {invariant: (new, known)})};
    exit_code None while in progress; buckets (new, known), not_recurred only with a baseline."""
    f = {n: {} for n in ('trials_total', 'violating_trials_total', 'violations_total',
                         'triaged_violations_total', 'buckets', 'run_in_progress',
                         'run_exit_code', 'last_run_timestamp_seconds',
                         'last_success_timestamp_seconds')}

    def put(name, value, **labels):
        f[name][tuple(sorted(dict(labels, subject=subject).items()))] = value
    for sc, (trials, violated) in scenarios.items():
        put('trials_total', trials, scenario=sc)
        # a trial here violates at most one invariant
        put('violating_trials_total', sum(n + k for n, k in violated.values()), scenario=sc)
        for inv in CHECKED:  # every checked invariant, 0 included
            new, known = violated.get(inv, (0, 0))
            put('violations_total', new + known, scenario=sc, invariant=inv)
            if new + known:  # only violated pairs, both statuses
                put('triaged_violations_total', new, scenario=sc, invariant=inv, status='new')
                put('triaged_violations_total', known, scenario=sc, invariant=inv, status='known')
    put('buckets', buckets[0], status='new')
    put('buckets', buckets[1], status='known')
    if not_recurred is not None:
        put('buckets', not_recurred, status='not_recurred')
    put('run_in_progress', 1 if exit_code is None else 0)
    if exit_code is not None:
        put('run_exit_code', exit_code)
        put('last_run_timestamp_seconds', finished)
        if exit_code == 0:
            put('last_success_timestamp_seconds', finished)
    return f


def pushed(group, families):
    """The Pushgateway's POST: each name with samples replaces the group's; an empty one leaves
    it (and last_success is empty unless the run exited 0)."""
    group.update({name: samples for name, samples in families.items() if samples})


def textfile(previous, families):
    """The file is replaced; a run that did not exit 0 repeats the last success it found."""
    if not families['last_success_timestamp_seconds']:
        families['last_success_timestamp_seconds'] = dict(
            previous.get('last_success_timestamp_seconds', {}))
    return families


def timeline():
    """{(job, instance): [state at hour 0, 1, ... LAST_HOUR]}, a state being what a scrape of
    that source at that hour returns ({} when it is down or empty)."""
    ok = (0, 0)
    shards = {0: {}, 1: {}}
    nights = {
        1: {0: ({'basic': (20, {}), 'kill-holder': (20, {})}, 0, 3540, ok, 1),
            1: ({'basic': (20, {}), 'kill-holder': (20, {})}, 0, 3570, ok, 1)},
        25: {0: ({'basic': (20, {}), 'kill-holder': (20, {'cleanup.safety': (0, 2)})},
                 0, 89940, (0, 1), 0),
             1: ({'basic': (20, {'prefix.unique': (3, 0)}), 'kill-holder': (20, {})},
                 1, 89970, (1, 0), 1)},
        49: {0: ({'basic': (20, {'cleanup.safety': (1, 0)}),
                  'kill-holder': (20, {'cleanup.safety': (0, 1)})}, 1, 176340, (1, 1), 0),
             1: ({'basic': (20, {}), 'kill-holder': (20, {})}, 0, 176370, ok, 1)},
    }
    node_runs = {
        10: ({'cleanup-while-live': (4, {})}, 4, 35940, ok),
        30: ({'cleanup-while-live': (4, {'cleanup.safety': (3, 0)})}, 1, 107940, (1, 0)),
        60: ({'cleanup-while-live': (4, {})}, 0, 215940, ok),
    }
    live = {3: ({'basic': (5, {})}, None, None, ok), 4: ({'basic': (12, {})}, None, None, ok),
            5: ({'basic': (20, {})}, 0, 17990, ok)}
    out = {('shmstress', f'shard-{i}-of-2'): [] for i in shards}
    out[('node', 'ci-runner:9100')] = []
    out[('shmstress-live', '127.0.0.1:9464')] = []
    node = {}
    for h in range(LAST_HOUR + 1):
        for i, (scenarios, code, at, b, nr) in nights.get(h, {}).items():
            pushed(shards[i], run(NATIVE, scenarios, code, at, b, nr))
        for i in shards:
            out[('shmstress', f'shard-{i}-of-2')].append(
                {k: list(v.items()) for k, v in shards[i].items()})
        if h in node_runs:
            node = textfile(node, run(STREAMING, *node_runs[h]))
        out[('node', 'ci-runner:9100')].append(
            {k: list(v.items()) for k, v in node.items()})
        out[('shmstress-live', '127.0.0.1:9464')].append(
            {k: list(v.items()) for k, v in run(NATIVE, *live[h]).items()} if h in live else {})
    return out


def input_series():
    """promtool's input_series: every series of the timeline, with `_` where it has no sample."""
    series = {}
    for (job, instance), states in timeline().items():
        for h, state in enumerate(states):
            for name, samples in state.items():
                for labels, value in samples:
                    key = pt.labels_text(dict(dict(labels), job=job, instance=instance),
                                         'shmstress_' + name)
                    series.setdefault(key, [None] * (LAST_HOUR + 1))[h] = value
    return [{'series': k, 'values': ' '.join('_' if v is None else pt.number(v) for v in vs)}
            for k, vs in sorted(series.items())]


# --- what the panels must show, worked out by hand ---------------------------------------------

SHM = {'job': 'shmstress'}
NODE = {'job': 'node'}
LIVE = {'job': 'shmstress-live'}


def pair(job, subject, scenario, invariant):
    return {'job': job, 'subject': subject, 'scenario': scenario, 'invariant': invariant}


CASES = [
    {'title': 'Time since the last green run',
     # time() - the oldest shard's last success; a job that never succeeded has no series.
     'values': {
         2: [(SHM, 3660)],                   # 7200 - min(3540, 3570)
         5: [(SHM, 14460), (LIVE, 10)],      # 18000 - 3540; 18000 - 17990 (live, final scrape)
         26: [(SHM, 90030)],                 # 93600 - min(89940, 3570): shard 1 failed night 2
         50: [(SHM, 90060)],                 # 180000 - min(89940, 176370): now shard 0 failed
         62: [(SHM, 133260), (NODE, 7260)],  # 223200 - 89940; 223200 - 215940 (node, run C)
         76: [(SHM, 183660), (NODE, 57660)],  # 273600 - 89940; 273600 - 215940
     },
     # orange from 93600 (26 h), red from 180000 (50 h)
     'alerts': {'orange': {62: [SHM], 76: [SHM]}, 'red': {76: [SHM]}}},

    {'title': 'Exit code of the last run',
     # max over shards; a run in progress has no exit code
     'values': {
         3: [(SHM, 0)],                      # live soak in progress: no series
         5: [(SHM, 0), (LIVE, 0)],
         26: [(SHM, 1), (NODE, 4)],          # max(0, 1); run A inconclusive
         50: [(SHM, 1), (NODE, 1)],          # max(1, 0); run B
         62: [(SHM, 1), (NODE, 0)],          # run C green
     },
     'alerts': {'red': {26: [SHM, NODE], 50: [SHM, NODE], 62: [SHM]}}},

    {'title': 'Violating trials in the last run',
     'values': {
         3: [(SHM, 0), (LIVE, 0)],
         26: [(SHM, 5), (NODE, 0)],          # 2 (shard 0, kill-holder) + 3 (shard 1, basic)
         50: [(SHM, 2), (NODE, 3)],          # 1 + 1 (shard 0) + 0 (shard 1); run B
         62: [(SHM, 2), (NODE, 0)],
     },
     'alerts': {'red': {26: [SHM], 50: [SHM, NODE], 62: [SHM]}}},

    {'title': 'Failure rate',
     # sum of violating / sum of trials per job and scenario, over both shards (40 trials)
     'values': {
         26: [({'job': 'shmstress', 'scenario': 'basic'}, 0.075),        # 3 / 40
              ({'job': 'shmstress', 'scenario': 'kill-holder'}, 0.05),   # 2 / 40
              ({'job': 'node', 'scenario': 'cleanup-while-live'}, 0)],   # 0 / 4
         50: [({'job': 'shmstress', 'scenario': 'basic'}, 0.025),        # 1 / 40
              ({'job': 'shmstress', 'scenario': 'kill-holder'}, 0.025),  # 1 / 40
              ({'job': 'node', 'scenario': 'cleanup-while-live'}, 0.75)],  # 3 / 4
     }},

    {'title': 'Violations by invariant',
     'values': {
         26: [({'job': 'shmstress', 'invariant': 'cleanup.safety'}, 2),  # shard 0, kill-holder
              ({'job': 'shmstress', 'invariant': 'prefix.unique'}, 3),   # shard 1, basic
              ({'job': 'node', 'invariant': 'cleanup.safety'}, 0),       # checked, held
              ({'job': 'node', 'invariant': 'prefix.unique'}, 0)],
         50: [({'job': 'shmstress', 'invariant': 'cleanup.safety'}, 2),  # 1 basic + 1 kill-holder
              ({'job': 'shmstress', 'invariant': 'prefix.unique'}, 0),
              ({'job': 'node', 'invariant': 'cleanup.safety'}, 3),
              ({'job': 'node', 'invariant': 'prefix.unique'}, 0)],
     }},

    {'title': 'Latest failing scenarios and invariants',
     # each series' latest value in the range (7d) summed over shards, > 0
     'values': {
         26: [(pair('shmstress', NATIVE, 'kill-holder', 'cleanup.safety'), 2),
              (pair('shmstress', NATIVE, 'basic', 'prefix.unique'), 3)],
         50: [(pair('shmstress', NATIVE, 'basic', 'cleanup.safety'), 1),
              (pair('shmstress', NATIVE, 'kill-holder', 'cleanup.safety'), 1),   # 1 + 0
              (pair('node', STREAMING, 'cleanup-while-live', 'cleanup.safety'), 3)],
         # basic prefix.unique is 0 in night 3 on both shards; run C violated nothing
         62: [(pair('shmstress', NATIVE, 'basic', 'cleanup.safety'), 1),
              (pair('shmstress', NATIVE, 'kill-holder', 'cleanup.safety'), 1)],
     }},

    {'title': 'New failure buckets in the last run',
     'values': {
         3: [(SHM, 0), (LIVE, 0)],
         26: [(SHM, 1), (NODE, 0)],          # 0 + 1
         50: [(SHM, 1), (NODE, 1)],          # 1 + 0; run B (no baseline: all new)
         62: [(SHM, 1), (NODE, 0)],
     },
     'alerts': {'red': {26: [SHM], 50: [SHM, NODE], 62: [SHM]}}},

    {'title': 'Known failure buckets that recurred',
     'values': {
         3: [(SHM, 0), (LIVE, 0)],
         26: [(SHM, 1), (NODE, 0)],          # shard 0's kill-holder cleanup.safety
         50: [(SHM, 1), (NODE, 0)],
         62: [(SHM, 1), (NODE, 0)],
     },
     'alerts': {'orange': {26: [SHM], 50: [SHM], 62: [SHM]}}},

    {'title': 'Known failures that did not recur',
     # only runs with a baseline have the series
     'values': {
         3: [(SHM, 2)],                      # 1 + 1
         26: [(SHM, 1)],                     # 0 + 1
         50: [(SHM, 1)],                     # 0 + 1
     },
     'alerts': {'blue': {3: [SHM], 26: [SHM], 50: [SHM]}}},

    {'title': 'Violations: new vs known',
     'values': {
         26: [({'job': 'shmstress', 'status': 'new'}, 3),     # shard 1 basic prefix.unique
              ({'job': 'shmstress', 'status': 'known'}, 2)],  # shard 0 kill-holder
         # night 3: shard 0 basic 1 new, kill-holder 1 known; not shard 1's night 2 series
         # that the gateway kept (its prefix.unique count is 0 in night 3)
         50: [({'job': 'shmstress', 'status': 'new'}, 1),
              ({'job': 'shmstress', 'status': 'known'}, 1),
              ({'job': 'node', 'status': 'new'}, 3),
              ({'job': 'node', 'status': 'known'}, 0)],
         62: [({'job': 'shmstress', 'status': 'new'}, 1),     # run C: no node series
              ({'job': 'shmstress', 'status': 'known'}, 1)],
     }},

    {'title': 'New failures in the latest run',
     'values': {
         26: [(pair('shmstress', NATIVE, 'basic', 'prefix.unique'), 3)],
         # not shard 1's night 2 prefix.unique (kept on the gateway, violated 0 times in night 3)
         50: [(pair('shmstress', NATIVE, 'basic', 'cleanup.safety'), 1),
              (pair('node', STREAMING, 'cleanup-while-live', 'cleanup.safety'), 3)],
         # not run B's cleanup.safety: run C replaced the file and violated nothing
         62: [(pair('shmstress', NATIVE, 'basic', 'cleanup.safety'), 1)],
     }},

    # The variables at a selection, put in as Grafana does (regex-escaped, several as (a|b)).
    {'title': 'Exit code of the last run', 'selection': {'subject': [STREAMING]},
     'values': {26: [(NODE, 4)], 62: [(NODE, 0)]}, 'alerts': None},
    {'title': 'Failure rate',
     'selection': {'job': ['shmstress', 'shmstress-live'], 'scenario': ['basic']},
     'values': {3: [({'job': 'shmstress', 'scenario': 'basic'}, 0),         # 0 / 40
                    ({'job': 'shmstress-live', 'scenario': 'basic'}, 0)],   # 0 / 5
                50: [({'job': 'shmstress', 'scenario': 'basic'}, 0.025)]},
     'alerts': None},
]


def build(dashboard, cases, directory):
    built = [pt.Case(dashboard, spec, INTERVAL) for spec in cases]
    return built, pt.write_cases(built, input_series(), INTERVAL, directory)


class PanelQueriesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DASHBOARD, encoding='utf-8') as f:
            cls.dashboard = json.load(f)
        cls.tmp = tempfile.TemporaryDirectory(prefix='panel-queries.')
        cls.cases, names = build(cls.dashboard, CASES, cls.tmp.name)
        results = pt.run_promtool(cls.tmp.name, names)
        cls.results = [results[name] for name in names]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check(self, n):
        case = self.cases[n]
        self.assertIsNone(self.results[n], f'{case.describe()}\n{self.results[n]}')

    # --- the cases as tests ------------------------------------------------------------------

    def test_cases(self):
        for n, case in enumerate(self.cases):
            with self.subTest(panel=case.title, selection=case.selection):
                self.check(n)

    def test_every_panel_with_thresholds_is_tested(self):
        # A colour above the base one is what the dashboard shows as needing attention: each
        # such panel has a case at All, with its alerts.
        tested = {c['title'] for c in CASES if c.get('alerts') is not None}
        with_steps = {p['title'] for p in vd.all_panels(self.dashboard['panels'])
                      if pt.threshold_steps(p)}
        self.assertEqual(with_steps - tested, set())

    def test_the_documented_alert_panels_are_tested(self):
        # docs/reports.md: alert on time() - last_success > 86400; and the exit code, new
        # buckets, violations over time and the failing pairs.
        titles = {c['title'] for c in CASES}
        self.assertLessEqual({'Time since the last green run', 'Exit code of the last run',
                              'New failure buckets in the last run', 'Violations: new vs known',
                              'New failures in the latest run',
                              'Latest failing scenarios and invariants'}, titles)

    def test_the_series_are_the_metrics_prometheus_cc_writes(self):
        # Only the names and labels reports/prometheus.cc writes (plus job and instance from
        # the scrape); a renamed metric there must be renamed here, or this fails.
        with open(os.path.join(vd.REPO, 'reports', 'prometheus.cc'), encoding='utf-8') as f:
            source = f.read()
        states = [state for states in timeline().values() for state in states]
        for name in {name for state in states for name in state}:
            self.assertIn(f'family("{name}"', source)
        labels = {k for state in states for samples in state.values()
                  for labels, _ in samples for k, _ in labels}
        self.assertEqual(labels, {'scenario', 'invariant', 'status', 'subject'})

    # --- the tests can fail --------------------------------------------------------------------

    def one(self, spec, dashboard=None):
        """promtool's report of one case (None if it passed)."""
        with tempfile.TemporaryDirectory(prefix='panel-queries.') as tmp:
            _, names = build(dashboard or self.dashboard, [spec], tmp)
            return pt.run_promtool(tmp, names)[names[0]]

    def spec(self, title):
        return copy.deepcopy(next(c for c in CASES if c['title'] == title))

    def test_a_wrong_value_fails(self):
        spec = self.spec('Failure rate')
        spec['values'][26][0] = (spec['values'][26][0][0], 0.08)
        report = self.one(spec)
        self.assertIsNotNone(report)
        self.assertIn('time: 1d2h', report)
        self.assertIn('{job="shmstress", scenario="basic"} 8E-02', report)  # expected
        self.assertIn('{job="shmstress", scenario="basic"} 7.5E-02', report)  # got

    def test_a_wrong_alert_fails(self):
        spec = self.spec('Exit code of the last run')
        spec['alerts']['red'][62] = []  # shard 0 exited 1 in night 3: the panel is red
        report = self.one(spec)
        self.assertIsNotNone(report)
        self.assertIn('alertname: panel_2_A_red, time: 2d14h', report)  # promtool's 62h

    def test_a_changed_panel_query_fails(self):
        # The oldest shard's success, not the newest: max instead of min.
        d = json.loads(json.dumps(self.dashboard))
        t = pt.target(pt.panel(d, 'Time since the last green run'))
        t['expr'] = t['expr'].replace('min by', 'max by')
        report = self.one(self.spec('Time since the last green run'), d)
        self.assertIsNotNone(report)
        self.assertIn('got: {job="shmstress"} 3.63E+03', report)  # 7200 - 3570

    def test_a_changed_threshold_fails(self):
        d = json.loads(json.dumps(self.dashboard))
        p = pt.panel(d, 'Time since the last green run')
        p['fieldConfig']['defaults']['thresholds']['steps'][1]['value'] = 86400
        report = self.one(self.spec('Time since the last green run'), d)
        self.assertIsNotNone(report)
        self.assertIn('alertname: panel_1_A_orange, time: 1d2h', report)  # 90030 >= 86400

    def test_a_new_threshold_step_needs_its_alerts(self):
        d = json.loads(json.dumps(self.dashboard))
        p = pt.panel(d, 'Failure rate')
        p['fieldConfig']['defaults']['thresholds'] = {
            'mode': 'absolute', 'steps': [{'color': 'green', 'value': None},
                                          {'color': 'red', 'value': 0.1}]}
        with self.assertRaisesRegex(ValueError, "panel 'Failure rate' has threshold steps"):
            pt.Case(d, self.spec('Failure rate'), INTERVAL)

    def test_a_renamed_panel_fails(self):
        d = json.loads(json.dumps(self.dashboard))
        pt.panel(d, 'Failure rate')['title'] = 'Failure ratio'
        with self.assertRaisesRegex(KeyError, "0 panels titled 'Failure rate'"):
            pt.Case(d, self.spec('Failure rate'), INTERVAL)

    def test_a_broken_query_fails(self):
        d = json.loads(json.dumps(self.dashboard))
        t = pt.target(pt.panel(d, 'Exit code of the last run'))
        t['expr'] = t['expr'].replace('max by (job)', 'max by (job')
        report = self.one(self.spec('Exit code of the last run'), d)
        self.assertIsNotNone(report)
        self.assertIn('parse error: unexpected "(" in grouping opts', report)

    def test_the_tables_former_query_showed_failures_of_older_runs(self):
        # Before the and-clause: last_over_time() of a pair that a later run did not violate
        # (its triaged series gone from the textfile, or kept by the gateway) still listed it.
        d = copy.deepcopy(self.dashboard)
        pt.target(pt.panel(d, 'New failures in the latest run'))['expr'] = (
            'sort_desc(sum by (job, subject, scenario, invariant) (last_over_time('
            'shmstress_triaged_violations_total{job=~"$job", subject=~"$subject", '
            'scenario=~"$scenario", status="new"}[$__range])) > 0)')
        report = self.one(self.spec('New failures in the latest run'), d)
        self.assertIsNotNone(report)
        self.assertIn('time: 2d2h', report)  # 50h: shard 1's prefix.unique of night 2
        self.assertIn('{invariant="prefix.unique", job="shmstress", scenario="basic", '
                      'subject="native"} 3E+00', report)
        self.assertIn('time: 2d14h', report)  # 62h: the node's run B

    def test_missing_promtool_fails_loudly(self):
        with self.assertRaisesRegex(pt.SetupError, 'not found'):
            pt.run_promtool(self.tmp.name, [], promtool='/nonexistent/promtool')


if __name__ == '__main__':
    unittest.main()
