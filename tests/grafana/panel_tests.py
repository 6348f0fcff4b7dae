"""Unit tests of a Grafana dashboard's panel queries with `promtool test rules`, over synthetic
series, with the queries taken from the dashboard at test time (test_panel_queries.py has the
series and the expected values).

A case names a panel by its title (and a target by its refId, default the panel's only one),
optionally a selection of the dashboard's variables (default: "All"), and what it expects:

- `values`: {hour: [(labels, value), ...]}: the query's result at that eval time, all of it (an
  instant query at that time, which is also one point of a graph panel's range query);
- `alerts`: {colour: {hour: [labels, ...]}}: for each step of the panel's thresholds above the
  base one, the series on which the panel shows that colour or a worse one (value >= the step's
  value, as Grafana colours it) at each hour of `values` (an hour not listed: none). They run as
  an alerting rule `(<query>) >= <step value>` per step, so what turns a panel red is tested as the
  alert a user would make of it. Every step needs its colour here; `alerts: None` leaves the
  thresholds out (a case that only tries another selection).

Each case is one promtool test file (and, with thresholds, a rule file); one promtool run checks
them all and says which case failed, with the panel's title and the query.
"""

import json
import os
import re
import shutil
import subprocess

import validate_dashboard as vd

SetupError = vd.SetupError


def seconds(duration):
    """'7d' -> 604800: a Prometheus duration of one unit."""
    m = re.fullmatch(r'(\d+)(ms|s|m|h|d|w|y)', duration)
    if not m:
        raise ValueError(f'not a duration: {duration!r}')
    unit = {'ms': 0.001, 's': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800, 'y': 31536000}
    return int(m.group(1)) * unit[m.group(2)]


def time_range(dashboard):
    """The dashboard's default time range as a duration ('now-7d' -> '7d'): $__range."""
    start = dashboard.get('time', {}).get('from', 'now-6h')
    m = re.fullmatch(r'now-(\d+[smhdwy])', start)
    if not m or dashboard.get('time', {}).get('to', 'now') != 'now':
        raise ValueError(f'time range {dashboard.get("time")} is not now-<duration> .. now')
    return m.group(1)


def grafana_values(dashboard, scrape_interval, selection=None):
    """What Grafana puts in place of every variable when the dashboard is shown over its default
    time range, against a Prometheus that scrapes every `scrape_interval`: $__range that range,
    $__interval the scrape interval (the step is never finer), $__rate_interval
    max($__interval + scrape interval, 4 x scrape interval) as Grafana computes it, and the
    dashboard's variables at `selection` or All."""
    scrape = seconds(scrape_interval)
    rng = time_range(dashboard)
    g = dict(vd.GLOBALS)
    g.update({'__interval': scrape_interval, '__interval_ms': str(scrape * 1000),
              '__rate_interval': f'{max(2 * scrape, 4 * scrape)}s',
              '__range': rng, '__range_s': str(seconds(rng)),
              '__range_ms': str(seconds(rng) * 1000)})
    return vd.variable_values(dashboard, selection, g)


def panel(dashboard, title):
    found = [p for p in vd.all_panels(dashboard.get('panels', [])) if p.get('title') == title]
    if len(found) != 1:
        raise KeyError(f"the dashboard has {len(found)} panels titled '{title}', expected 1")
    return found[0]


def target(p, ref_id=None):
    targets = p.get('targets') or []
    if ref_id is None:
        if len(targets) != 1:
            raise KeyError(f"panel '{p['title']}' has {len(targets)} targets: name one (ref)")
        return targets[0]
    for t in targets:
        if t.get('refId') == ref_id:
            return t
    raise KeyError(f"panel '{p['title']}' has no target {ref_id}")


def threshold_steps(p):
    """[(colour, value)] of the panel's threshold steps above the base one (absolute mode)."""
    th = p.get('fieldConfig', {}).get('defaults', {}).get('thresholds') or {}
    steps = [s for s in th.get('steps', []) if s.get('value') is not None]
    if steps and th.get('mode', 'absolute') != 'absolute':
        raise ValueError(f"panel '{p['title']}': thresholds mode {th.get('mode')} is not absolute")
    return [(s['color'], s['value']) for s in steps]


def labels_text(labels, name=''):
    def quoted(v):
        return '"' + v.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n') + '"'
    return name + '{' + ', '.join(f'{k}={quoted(v)}' for k, v in sorted(labels.items())) + '}'


def number(v):
    return str(int(v)) if float(v).is_integer() else repr(float(v))


class Case:
    """One panel query, as the dashboard has it now, with what the test expects of it."""

    def __init__(self, dashboard, spec, scrape_interval):
        self.title = spec['title']
        self.panel = panel(dashboard, self.title)
        self.target = target(self.panel, spec.get('ref'))
        self.ref = self.target.get('refId', 'A')
        self.selection = spec.get('selection')
        values = grafana_values(dashboard, scrape_interval, self.selection)
        left = vd.undefined_variables(self.target.get('expr', ''), values)
        if left:
            raise ValueError(f"panel '{self.title}': undefined variables {left}")
        self.expr = vd.expand(self.target['expr'], values)
        self.values = spec.get('values', {})
        self.alerts = spec.get('alerts', {})
        if not self.values:
            raise ValueError(f"case for panel '{self.title}' expects nothing")
        self.steps = threshold_steps(self.panel) if self.alerts is not None else []
        colours = [c for c, _ in self.steps]
        if self.alerts is not None and sorted(self.alerts) != sorted(colours):
            raise ValueError(f"panel '{self.title}' has threshold steps {self.steps}; the case "
                             f'expects alerts for {sorted(self.alerts)}: one per step')

    def describe(self):
        sel = f' with {self.selection}' if self.selection else ''
        return f"panel '{self.title}' target {self.ref}{sel}: {self.expr}"

    def alert_name(self, colour):
        return re.sub(r'\W', '_', f'panel_{self.panel.get("id")}_{self.ref}_{colour}')

    def rules(self):
        return {'groups': [{'name': f'panel {self.panel.get("id")} {self.ref}', 'rules': [
            {'alert': self.alert_name(c), 'expr': f'({self.expr}) >= {number(v)}',
             'labels': {'panel': self.title, 'colour': c}} for c, v in self.steps]}]}

    def test_file(self, series, interval, rule_file=None):
        hours = sorted(self.values)
        expr_tests = [{'expr': self.expr, 'eval_time': f'{h}h', 'exp_samples': [
            {'labels': labels_text(lab), 'value': float(v)} for lab, v in self.values[h]]}
            for h in hours]
        alert_tests = []
        for colour, _ in self.steps:
            for h in hours:
                alert_tests.append({'eval_time': f'{h}h', 'alertname': self.alert_name(colour),
                                    'exp_alerts': [{'exp_labels': dict(lab, panel=self.title,
                                                                       colour=colour)}
                                                   for lab in self.alerts[colour].get(h, [])]})
        unknown = {h for c in (self.alerts or {}).values() for h in c} - set(hours)
        if unknown:
            raise ValueError(f"case for panel '{self.title}': alerts at hours {sorted(unknown)} "
                             'without values there')
        test = {'interval': interval, 'input_series': series, 'promql_expr_test': expr_tests}
        if alert_tests:
            test['alert_rule_test'] = alert_tests
        return {'rule_files': [rule_file] if rule_file else [], 'evaluation_interval': interval,
                'tests': [test]}


def write_cases(cases, series, interval, directory):
    """Writes one test file per case (JSON, which is YAML) into `directory`; returns their names
    in the order of `cases`."""
    names = []
    for n, case in enumerate(cases):
        base = f'case-{n:02d}-panel-{case.panel.get("id")}-{case.ref}'
        rule_file = None
        if case.steps:
            rule_file = base + '.rules.yml'
            with open(os.path.join(directory, rule_file), 'w', encoding='utf-8') as f:
                json.dump(case.rules(), f, indent=1)
        with open(os.path.join(directory, base + '.test.yml'), 'w', encoding='utf-8') as f:
            json.dump(case.test_file(series, interval, rule_file), f, indent=1)
        names.append(base + '.test.yml')
    return names


def run_promtool(directory, names, promtool='promtool'):
    """Runs `promtool test rules` once over the files; returns {name: None if it passed, else
    promtool's report of it}. Raises SetupError if promtool is missing or says nothing of a file."""
    exe = shutil.which(promtool)
    if exe is None:
        raise SetupError(f'{promtool} not found: it runs the panel queries (scripts/setup installs '
                         'the package prometheus)')
    # One stream: promtool names a file on stdout and reports its failures on stderr.
    r = subprocess.run([exe, 'test', 'rules', *names], cwd=directory, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    text = r.stdout
    chunks, current = {}, None
    for line in text.splitlines():
        m = re.match(r'Unit Testing:\s+(\S+)\s*$', line)
        if m:
            current = m.group(1)
            chunks[current] = []
        elif current is not None:
            chunks[current].append(line)
    results = {}
    for name in names:
        if name not in chunks:
            raise SetupError(f'promtool test rules said nothing of {name} (exit {r.returncode}):'
                             f'\n{text}')
        body = '\n'.join(chunks[name]).strip()
        results[name] = None if body == 'SUCCESS' else body
    if r.returncode != 0 and all(v is None for v in results.values()):
        raise SetupError(f'promtool test rules exited {r.returncode} with every file passing:\n'
                         f'{text}')
    if r.returncode == 0 and any(v is not None for v in results.values()):
        raise SetupError(f'promtool test rules exited 0 but reported failures:\n{text}')
    return results
