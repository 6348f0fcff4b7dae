"""reports/grafana/shmstress.json is what Grafana accepts, and the check refuses what it would not.

Run from the repository root (ctest: grafana.dashboard):

    /usr/bin/python3 -m unittest discover -s tests/grafana -v

The shipped dashboard must have no problem; every other test breaks one thing in a copy of it and
asserts the specific problem the check reports for it (the first three are the errors the dashboard
had against Grafana's schema before it was checked).
"""

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import validate_dashboard as vd  # noqa: E402

DASHBOARD = os.path.join(vd.REPO, 'reports', 'grafana', 'shmstress.json')
SCHEMAS = os.environ.get('GRAFANA_SCHEMA_DIR', vd.DEFAULT_SCHEMAS)


def first(d, panel_type):
    """(index, panel) of the dashboard's first panel of a type."""
    return next((i, p) for i, p in enumerate(d['panels']) if p['type'] == panel_type)


def variable(d, name):
    return next(v for v in d['templating']['list'] if v['name'] == name)


class DashboardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.schemas = vd.Schemas(SCHEMAS)
        with open(DASHBOARD, encoding='utf-8') as f:
            cls.shipped = json.load(f)

    def broken(self, mutate):
        """The problems of a copy of the shipped dashboard that `mutate` changed."""
        d = copy.deepcopy(self.shipped)
        mutate(d)
        return vd.problems(d, self.schemas)

    def assertProblem(self, found, *fragments):
        self.assertTrue(any(all(f in line for f in fragments) for line in found),
                        f'no problem with {fragments} among:\n  ' + '\n  '.join(found))

    # --- the shipped dashboard ---------------------------------------------------------------

    def test_shipped_dashboard_has_no_problem(self):
        self.assertEqual(vd.problems(self.shipped, self.schemas), [])

    def test_shipped_dashboard_has_panels_of_each_checked_type(self):
        # So that the per-type schema checks below check something the dashboard has.
        types = {p['type'] for p in self.shipped['panels']}
        self.assertLessEqual({'stat', 'timeseries', 'table'}, types)
        self.assertGreaterEqual(sum(len(p['targets']) for p in self.shipped['panels']), 12)

    def test_cli_accepts_the_shipped_and_rejects_a_broken_copy(self):
        script = os.path.join(HERE, 'validate_dashboard.py')
        ok = subprocess.run([sys.executable, '-B', script, '--schemas', SCHEMAS, DASHBOARD],
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        self.assertIn(': ok (', ok.stdout)
        d = copy.deepcopy(self.shipped)
        first(d, 'timeseries')[1]['targets'][0]['expr'] += ' +'
        with tempfile.TemporaryDirectory(prefix='grafana-test.') as tmp:
            path = os.path.join(tmp, 'broken.json')
            with open(path, 'w', encoding='utf-8') as f:
                json.dump(d, f)
            bad = subprocess.run([sys.executable, '-B', script, '--schemas', SCHEMAS, path],
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
        self.assertIn('target-promql-rule', bad.stdout)
        self.assertIn('FAILED, 1 problems', bad.stdout)

    # --- the dashboard's errors before it was checked ------------------------------------------

    def test_table_override_with_string_matcher_options_is_refused(self):
        i, _ = first(self.shipped, 'table')

        def old_override(d):
            d['panels'][i]['fieldConfig']['overrides'][0] = {
                'matcher': {'id': 'byName', 'options': 'violating trials'},
                'properties': [{'id': 'custom.displayMode', 'value': 'color-background'}]}
        found = self.broken(old_override)
        self.assertProblem(found, f'schema: /panels/{i}/fieldConfig/overrides/0/matcher/options',
                           "'violating trials' is not of type 'object'")
        self.assertProblem(found, f'/panels/{i}/fieldConfig/overrides/0/properties/0/value',
                           "'color-background' is not of type 'object'")

    def test_variable_current_without_text_and_value_is_refused(self):
        found = self.broken(lambda d: variable(d, 'datasource').update(current={}))
        self.assertProblem(found, 'schema: /templating/list/0/current', "'text' is a required")
        self.assertProblem(found, 'schema: /templating/list/0/current', "'value' is a required")

    def test_variable_query_object_is_refused(self):
        def as_object(d):
            v = variable(d, 'job')
            v['query'] = {'query': v['query'], 'refId': 'job-var'}
        found = self.broken(as_object)
        self.assertProblem(found, 'schema: /templating/list/1/query', "is not of type 'string'")

    # --- panel types' own schemas --------------------------------------------------------------

    def test_stat_options_missing_a_required_field_is_refused(self):
        i, _ = first(self.shipped, 'stat')
        found = self.broken(lambda d: d['panels'][i]['options'].pop('wideLayout'))
        self.assertEqual(found, [f"stat-schema: /panels/{i}/options: 'wideLayout' is a required "
                                 'property'])

    def test_timeseries_custom_field_config_is_checked(self):
        i, _ = first(self.shipped, 'timeseries')
        found = self.broken(lambda d: d['panels'][i]['fieldConfig']['defaults']['custom'].update(
            lineInterpolation='curvy'))
        self.assertProblem(found, f'timeseries-schema: /panels/{i}/fieldConfig/defaults/custom/'
                           "lineInterpolation: 'curvy' is not one of")

    def test_timeseries_legend_option_is_checked(self):
        i, _ = first(self.shipped, 'timeseries')
        found = self.broken(lambda d: d['panels'][i]['options']['legend'].update(placement='top'))
        self.assertProblem(found, f'timeseries-schema: /panels/{i}/options/legend/placement',
                           "'top' is not one of")

    def test_stat_has_no_custom_field_config(self):
        i, _ = first(self.shipped, 'stat')
        found = self.broken(lambda d: d['panels'][i]['fieldConfig']['defaults'].update(
            custom={'drawStyle': 'line'}))
        self.assertProblem(found, f'/panels/{i}/fieldConfig/defaults/custom',
                           "panel type 'stat' has no custom field config")

    def test_table_options_are_checked(self):
        i, _ = first(self.shipped, 'table')
        found = self.broken(lambda d: d['panels'][i]['options'].update(cellHeight='huge'))
        self.assertProblem(found, f'table-schema: /panels/{i}/options/cellHeight',
                           "'huge' is not one of")

    def test_ambiguous_table_cell_options_are_refused(self):
        # The generated schema's oneOf has no discriminator: {type: color-background, mode: basic}
        # is also a bar gauge's; applyToRow makes it only the colored background.
        i, _ = first(self.shipped, 'table')
        found = self.broken(lambda d: d['panels'][i]['fieldConfig']['overrides'][0]['properties'][0]
                            ['value'].pop('applyToRow'))
        self.assertProblem(found, f'table-schema: /panels/{i}/fieldConfig/overrides/0/properties/0/'
                           'value', 'is valid under each of')

    def test_override_properties_are_checked(self):
        i, _ = first(self.shipped, 'table')

        def bad_props(d):
            d['panels'][i]['fieldConfig']['overrides'][0]['properties'] = [
                {'id': 'custom.colour', 'value': {}},
                {'id': 'color', 'value': {'mode': 'purple'}}]
        found = self.broken(bad_props)
        self.assertProblem(found, "unknown field config property 'custom.colour'")
        self.assertProblem(found, f'/panels/{i}/fieldConfig/overrides/0/properties/1/value/mode',
                           "'purple' is not one of")

    def test_panel_type_without_a_schema_is_refused(self):
        i, _ = first(self.shipped, 'stat')
        found = self.broken(lambda d: d['panels'][i].update(type='gauge'))
        self.assertProblem(found, "no schema for panel type 'gauge'")

    def test_panels_inside_a_row_are_checked(self):
        def into_row(d):
            i, p = first(d, 'stat')
            p['options'].pop('reduceOptions')
            d['panels'][i] = {'type': 'row', 'id': 99, 'title': 'row', 'collapsed': True,
                              'gridPos': {'x': 0, 'y': 0, 'w': 24, 'h': 1}, 'panels': [p]}
        i, _ = first(self.shipped, 'stat')
        found = self.broken(into_row)
        self.assertEqual(found, [f"stat-schema: /panels/{i}/panels/0/options: 'reduceOptions' is a "
                                 'required property'])

    def test_target_is_checked_against_the_prometheus_query_schema(self):
        i, _ = first(self.shipped, 'stat')

        def bad_target(d):
            t = d['panels'][i]['targets'][0]
            t['instant'] = 'yes'
            t['exemplars'] = True  # the field is "exemplar"
        found = self.broken(bad_target)
        self.assertProblem(found, f'prometheus-schema: /panels/{i}/targets/0/instant',
                           "'yes' is not of type 'boolean'")
        self.assertProblem(found, f'prometheus-schema: /panels/{i}/targets/0',
                           "'exemplars' was unexpected")

    # --- the linter's rules --------------------------------------------------------------------

    def test_panel_without_a_unit_is_refused(self):
        i, p = first(self.shipped, 'timeseries')
        found = self.broken(lambda d: d['panels'][i]['fieldConfig']['defaults'].pop('unit'))
        self.assertEqual(found, [f"panel-units-rule: panel {p['id']} '{p['title']}' has no or an "
                                 "invalid unit: ''"])

    def test_panel_with_an_unknown_unit_is_refused(self):
        i, _ = first(self.shipped, 'table')
        found = self.broken(lambda d: d['panels'][i]['fieldConfig']['defaults'].update(
            unit='seconds'))
        self.assertProblem(found, 'panel-units-rule', "invalid unit: 'seconds'")

    def test_panel_with_a_fixed_data_source_is_refused(self):
        i, _ = first(self.shipped, 'timeseries')

        def fixed(d):
            d['panels'][i]['datasource'] = {'type': 'prometheus', 'uid': 'P1809F7CD0C75ACF3'}
            d['panels'][i]['targets'][0]['datasource'] = {'type': 'prometheus', 'uid': 'prom'}
        found = self.broken(fixed)
        self.assertProblem(found, 'panel-datasource-rule', "'uid': 'P1809F7CD0C75ACF3'")
        self.assertProblem(found, 'panel-datasource-rule', 'target A', "'uid': 'prom'")

    def test_dashboard_without_a_datasource_variable_is_refused(self):
        found = self.broken(lambda d: d['templating']['list'].pop(0))
        self.assertProblem(found, "template-datasource-rule: no variable of type 'datasource'")
        self.assertProblem(found, 'panel-datasource-rule')

    def test_datasource_variable_is_named_and_labelled_as_the_linter_wants(self):
        found = self.broken(lambda d: variable(d, 'datasource').update(name='ds', label='Prom'))
        self.assertProblem(found, "template-datasource-rule: variable 'ds' should be named "
                           'datasource or prometheus_datasource')
        self.assertProblem(found, "variable 'ds' labelled 'Prom'")

    def test_query_variable_without_the_templated_data_source_is_refused(self):
        found = self.broken(lambda d: variable(d, 'subject').pop('datasource'))
        self.assertEqual(found, ["template-datasource-rule: variable 'subject' should use data "
                                 'source {type: prometheus, uid: ${datasource}}, has None'])

    def test_query_variable_not_refreshed_on_time_change_is_refused(self):
        found = self.broken(lambda d: variable(d, 'scenario').update(refresh=1))
        self.assertProblem(found, "template-on-time-change-reload: variable 'scenario' has "
                           'refresh 1')

    def test_unparsable_target_is_refused_by_prometheus_parser(self):
        i, p = first(self.shipped, 'timeseries')

        def unclosed(d):
            t = d['panels'][i]['targets'][0]
            t['expr'] = t['expr'].rstrip(')')
        found = self.broken(unclosed)
        self.assertProblem(found, f"target-promql-rule: panel {p['id']}", 'could not parse',
                           'unclosed left parenthesis')

    def test_invalid_regex_after_substitution_is_refused(self):
        # Prometheus compiles =~ at parse time; the variables are put in as Grafana would.
        i, _ = first(self.shipped, 'stat')
        found = self.broken(lambda d: d['panels'][i]['targets'][0].update(
            expr='max(shmstress_run_exit_code{job=~"($job"})'))
        self.assertProblem(found, 'target-promql-rule', 'error parsing regexp')

    def test_query_is_also_parsed_with_the_variables_at_a_selection(self):
        # [.*] is a character class; with scenarios selected it is [(basic|kill-holder|...)],
        # whose l-h is a range Prometheus' regexp compiler refuses.
        i, p = first(self.shipped, 'stat')
        found = self.broken(lambda d: d['panels'][i]['targets'][0].update(
            expr='sum(shmstress_trials_total{scenario=~"[$scenario]"})'))
        self.assertEqual(len(found), 1, found)
        self.assertProblem(found, f"target-promql-rule: panel {p['id']} '{p['title']}' target A "
                           '(variables at a selection): invalid PromQL',
                           'scenario=~"[(basic|kill-holder|cleanup-while-live)]"',
                           'invalid character class range')

    def test_variables_are_put_in_as_grafana_does(self):
        multi = {'name': 'subject', 'multi': True, 'includeAll': True, 'allValue': '.*'}
        self.assertEqual(vd.grafana_value(multi, None), '.*')
        self.assertEqual(vd.grafana_value(multi, ['native']), 'native')
        self.assertEqual(vd.grafana_value(multi, ['exec:/usr/bin/python3 a.py', 'x(1)|y']),
                         r'(exec:/usr/bin/python3 a\\.py|x\\(1\\)\\|y)')
        self.assertEqual(vd.grafana_value({'name': 'one'}, ['a\\b']), 'a\\\\b')
        values = vd.variable_values(self.shipped, {'job': ['node'], 'scenario': ['a', 'b']})
        self.assertEqual(vd.expand('x{job=~"$job", scenario=~"${scenario}", subject=~"$subject"}'
                                   '[$__rate_interval]', values),
                         'x{job=~"node", scenario=~"(a|b)", subject=~".*"}[1m]')

    def test_empty_target_is_refused(self):
        i, _ = first(self.shipped, 'stat')
        found = self.broken(lambda d: d['panels'][i]['targets'][0].update(expr=' '))
        self.assertProblem(found, 'target-promql-rule', 'has no expr')

    def test_rate_over_a_fixed_range_is_refused(self):
        def fixed_range(d):
            for p in d['panels']:
                for t in p['targets']:
                    t['expr'] = t['expr'].replace('[$__rate_interval]', '[5m]')
        found = self.broken(fixed_range)
        self.assertProblem(found, 'target-rate-interval-rule', 'rate() over [5m], should use '
                           '[$__rate_interval]')

    def test_label_values_query_must_parse(self):
        def broken_selector(d):
            v = variable(d, 'scenario')
            v['query'] = v['definition'] = \
                'label_values(shmstress_trials_total{job=~"$job",}}, scenario)'
        found = self.broken(broken_selector)
        self.assertProblem(found, "template-label-promql-rule: variable 'scenario'",
                           'could not parse')

    def test_label_values_query_must_name_a_label(self):
        def no_label(d):
            v = variable(d, 'job')
            v['query'] = v['definition'] = 'label_values(shmstress_trials_total, "job")'
        self.assertProblem(self.broken(no_label), "variable 'job'", 'is not a label name')

    def test_variable_definition_must_equal_its_query(self):
        # Grafana runs `query`, tests/e2e/prometheus.sh runs `definition`.
        found = self.broken(lambda d: variable(d, 'job').update(definition='label_values(up, job)'))
        self.assertProblem(found, "variable 'job' definition", 'differs from its query')

    def test_undefined_variable_is_refused(self):
        i, p = first(self.shipped, 'timeseries')
        found = self.broken(lambda d: d['panels'][i]['targets'][0].update(
            expr=d['panels'][i]['targets'][0]['expr'].replace('$scenario', '$shard')))
        self.assertProblem(found, f"variables: panel {p['id']}", 'uses undefined $shard')

    def test_label_replace_group_reference_is_not_a_variable(self):
        i, _ = first(self.shipped, 'stat')
        found = self.broken(lambda d: d['panels'][i]['targets'][0].update(
            expr='label_replace(max(shmstress_run_exit_code{job=~"$job"}), "j", "$1", "job", '
                 '"(.*)")'))
        self.assertEqual(found, [])

    def test_duplicate_panel_id_and_ref_id_are_refused(self):
        def duplicates(d):
            d['panels'][1]['id'] = d['panels'][0]['id']
            _, p = first(d, 'timeseries')
            p['targets'].append(copy.deepcopy(p['targets'][0]))
        found = self.broken(duplicates)
        self.assertProblem(found, 'duplicate panel id')
        self.assertProblem(found, 'duplicate refId')

    def test_panel_without_description_or_targets_is_refused(self):
        i, _ = first(self.shipped, 'stat')

        def bare(d):
            d['panels'][i].pop('description')
            d['panels'][i]['targets'] = []
        found = self.broken(bare)
        self.assertProblem(found, 'panel-title-description-rule')
        self.assertProblem(found, 'panel-no-targets-rule')

    # --- the range-selector reading behind target-rate-interval-rule -----------------------------

    def test_range_rule_on_single_expressions(self):
        cases = {
            'sum(rate(x_total{a="b"}[$__rate_interval]))': [],
            'sum by (le) (irate(x_bucket[${__rate_interval}]))': [],
            'last_over_time(x[$__range])': [],
            'max_over_time(x[5m]) / rate(y[$__rate_interval] offset 1h)': [],
            'rate(x[5m:1m])': [],  # a subquery: the linter leaves those alone
            'sum(rate(x{a="]"}[1m]))': ['rate() over [1m], should use [$__rate_interval]'],
            'sum by (job) (irate(x[5m]))': ['irate() over [5m], should use [$__rate_interval]'],
            'x[$__rate_interval]': ['[$__rate_interval] used outside a function call'],
        }
        for expr, expected in cases.items():
            with self.subTest(expr=expr):
                self.assertEqual(vd.range_problems(expr), expected)

    # --- the check cannot silently pass ----------------------------------------------------------

    def test_missing_promtool_fails_the_check(self):
        with self.assertRaisesRegex(vd.SetupError, 'not found'):
            vd.problems(self.shipped, self.schemas, promtool='/nonexistent/promtool')

    def test_missing_schema_directory_fails_the_check(self):
        with self.assertRaisesRegex(vd.SetupError, 'no Grafana schema directory'):
            vd.Schemas('/nonexistent/grafana-schema')


if __name__ == '__main__':
    unittest.main()
