#!/usr/bin/python3
"""Checks a Grafana dashboard against what Grafana itself accepts, with no Grafana server.

    /usr/bin/python3 tests/grafana/validate_dashboard.py reports/grafana/shmstress.json

prints one line per problem and exits 1 if there is any. Checked, in that order:

- schema: the dashboard against Grafana's dashboard.jsonschema.json; each panel's `options`, its
  `fieldConfig.defaults.custom` and the values of its overrides against the schema of its panel type
  (`<type>.jsonschema.json`: a type without one is refused, not skipped); each target against the
  Prometheus query schema. The schemas are tests/grafana/schema (vendored from ../shared/reference/grafana-schema),
  or --schemas DIR.
- the rules of Grafana's dashboard-linter that the schemas' README lists, with the linter's rule
  names: template-datasource-rule, panel-datasource-rule, panel-units-rule, target-promql-rule and
  template-label-promql-rule (parsed by Prometheus' own parser, `promtool check rules`),
  target-rate-interval-rule; and its cheap neighbours panel-title-description-rule,
  panel-no-targets-rule, template-on-time-change-reload. Plus what the e2e test and Grafana rely on:
  unique panel ids and refIds, no undefined `$variable`, a query variable's `definition` equal to
  its `query`.

Needs Debian's python3-jsonschema and promtool (package prometheus); scripts/setup installs both.
Without either it fails, it never skips.
"""

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# Vendored, unchanged, with Grafana's LICENSE (schema/README.md says from where), so a clean
# clone checks the dashboard with nothing beside it.
DEFAULT_SCHEMAS = os.path.join(HERE, 'schema')

# Grafana's unit ids (packages/grafana-data/src/valueFormats/categories.ts), as the linter's
# panel-units-rule knows them; a panel whose unit is not here (or a custom one) is refused.
UNITS = set('''
none string short percent percentunit humidity dB hex0x hex sci locale pixel
accMS2 accFS2 accG degree radian grad arcmin arcsec areaM2 areaF2 areaMI2
flops mflops gflops tflops pflops eflops zflops yflops
ppm conppb conngm3 conngNm3 conμgm3 conμgNm3 conmgm3 conmgNm3 congm3 congNm3 conmgdL conmmolL
currencyUSD currencyGBP currencyEUR currencyJPY currencyRUB currencyUAH currencyBRL currencyDKK
currencyISK currencyNOK currencySEK currencyCZK currencyCHF currencyPLN currencyBTC currencymBTC
currencyμBTC currencyZAR currencyINR currencyKRW currencyIDR currencyPHP currencyVND
bytes decbytes bits decbits kbytes deckbytes mbytes decmbytes gbytes decgbytes tbytes dectbytes
pbytes decpbytes
pps binBps Bps binbps bps KiBs Kibits KBs Kbits MiBs Mibits MBs Mbits GiBs Gibits GBs Gbits
TiBs Tibits TBs Tbits PiBs Pibits PBs Pbits
dateTimeAsIso dateTimeAsIsoNoDateIfToday dateTimeAsUS dateTimeAsUSNoDateIfToday dateTimeAsLocal
dateTimeAsLocalNoDateIfToday dateTimeAsSystem dateTimeFromNow
watt kwatt megwatt gwatt mwatt Wm2 voltamp kvoltamp voltampreact kvoltampreact watth watthperkg
kwatth kwattm amph kamph mamph joule ev amp kamp mamp volt kvolt mvolt dBm ohm kohm Mohm farad
µfarad nfarad pfarad ffarad henry mhenry µhenry lumens
flowgpm flowcms flowcfs flowcfm litreh flowlpm flowmlpm lux
forceNm forcekNm forceN forcekN Hs KHs MHs GHs THs PHs EHs
massmg massg masslb masskg masst lengthmm lengthin lengthft lengthm lengthkm lengthmi
pressurembar pressurebar pressurekbar pressurepa pressurehpa pressurekpa pressurehg pressurepsi
radbq radci radgy radrad radsv radmsv radusv radrem radexpckg radr radsvh radmsvh radusvh
rotrpm rothz rotrads rotdegs celsius fahrenheit kelvin
hertz ns µs ms s m h d dtdurationms dtdurations dthms dtdhms timeticks clockms clocks
cps ops reqps rps wps iops cpm opm rpm wpm
velocityms velocitykmh velocitymph velocityknot mlitre litre m3 Nm3 dm3 gallons
bool bool_yes_no bool_on_off
'''.split())

# Grafana's global variables, and what it puts in their place (for parsing: any value of the
# right kind will do; durations as Grafana prints them, the *_ms/_s ones as bare numbers).
GLOBALS = {
    '__rate_interval': '1m', '__interval': '15s', '__range': '7d', '__interval_ms': '15000',
    '__range_s': '604800', '__range_ms': '604800000', '__from': '1700000000000',
    '__to': '1700604800000', '__dashboard': 'shmstress', '__name': 'name', '__org': '1',
    '__user': 'user',
}
# A selection a user could make, the second reading of every query beside "All" (each variable's
# allValue): put in as Grafana's Prometheus data source puts a multi-value or include-All
# variable's values (regex-escaped; several as `(a|b)`), so a query that parses only with `.*`
# is caught. The subject has regex metacharacters, as an exec: subject does.
EXAMPLE_SELECTION = {
    'job': ['shmstress', 'node'],
    'subject': ['exec:/usr/bin/python3 subjects/streaming/adapter.py'],
    'scenario': ['basic', 'kill-holder', 'cleanup-while-live'],
}
# $var, ${var} or ${var:format}, [[var]] or [[var:format]]
VARIABLE_RE = re.compile(r'\$\{([^}:]+)(?::[^}]*)?\}|\$(\w+)|\[\[([^\[\]:]+)(?::[^\]]*)?\]\]')
RATE_FUNCTIONS = {'rate', 'irate'}  # the linter's; their range must be $__rate_interval
LABEL_FUNCTIONS = {'label_names', 'label_values', 'metrics', 'query_result'}
QUERY_PANEL_TYPES = {'stat', 'timeseries', 'table', 'gauge', 'bargauge', 'state-timeline'}


class SetupError(Exception):
    """The check itself cannot run (a schema or promtool missing): a failure, never a pass."""


class Schemas:
    """Validators built from Grafana's JSON Schemas in one directory."""

    def __init__(self, directory):
        self.directory = directory
        if not os.path.isdir(directory):
            raise SetupError(f'no Grafana schema directory {directory} (see --schemas)')
        self.dashboard_doc = self._load('dashboard')
        self.dashboard = jsonschema.Draft7Validator(self.dashboard_doc)
        self.prometheus = jsonschema.Draft7Validator(self._load('prometheus'))
        self._panels = {}

    def _load(self, name):
        path = os.path.join(self.directory, name + '.jsonschema.json')
        if not os.path.isfile(path):
            raise SetupError(f'missing schema {path}')
        with open(path, encoding='utf-8') as f:
            doc = json.load(f)
        jsonschema.Draft7Validator.check_schema(doc)
        return doc

    def panel(self, panel_type):
        """(options schema, fieldConfig.custom schema or None, definitions) of a panel type, or
        None when the directory has no schema for it."""
        if panel_type not in self._panels:
            path = os.path.join(self.directory, panel_type + '.jsonschema.json')
            if not re.fullmatch(r'[a-z][a-z0-9-]*', panel_type) or not os.path.isfile(path):
                self._panels[panel_type] = None
            else:
                doc = self._load(panel_type)
                defs = doc.get('definitions', {})
                if 'Options' not in defs:
                    raise SetupError(f'{path} has no definitions/Options')
                self._panels[panel_type] = (defs['Options'], defs.get('FieldConfig'), defs)
        return self._panels[panel_type]


def validate(schema, definitions, instance):
    """Errors of `instance` against `schema`, whose $refs point into `definitions`."""
    root = {'allOf': [schema], 'definitions': definitions}
    return jsonschema.Draft7Validator(root).iter_errors(instance)


def describe(error, prefix=()):
    """One line per leaf error; of a oneOf/anyOf, the branch that came closest."""
    if error.context:
        branches = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        best = min(branches.values(), key=len)
        return [line for sub in best for line in describe(sub, prefix)]
    where = '/' + '/'.join(str(p) for p in (*prefix, *error.absolute_path))
    message = error.message if len(error.message) < 200 else error.message[:197] + '...'
    return [f'{where}: {message}']


def resolve(schema, definitions):
    """Follows $ref / single-allOf wrappers to the schema that has the properties."""
    for _ in range(20):
        if '$ref' in schema:
            schema = definitions[schema['$ref'].rsplit('/', 1)[1]]
        elif 'allOf' in schema and len(schema['allOf']) == 1 and 'properties' not in schema:
            schema = schema['allOf'][0]
        else:
            return schema
    return schema


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get('panels', []))


def label(p):
    return f"panel {p.get('id')} '{p.get('title', '')}'"


def variables_of(dashboard):
    return [v for v in dashboard.get('templating', {}).get('list', []) if isinstance(v, dict)]


# --- schema ----------------------------------------------------------------------------------

def schema_problems(d, schemas):
    out = [f'schema: {line}' for e in schemas.dashboard.iter_errors(d) for line in describe(e)]
    dash_defs = schemas.dashboard_doc['definitions']
    field_config_props = dash_defs['FieldConfig']['properties']
    for i, p in enumerate(d.get('panels', [])):
        for path, panel in [(('panels', i), p)] + [
                (('panels', i, 'panels', j), q) for j, q in enumerate(p.get('panels', []))]:
            if panel.get('type') == 'row':
                continue
            where = '/'.join(map(str, path))
            found = schemas.panel(panel.get('type', ''))
            if found is None:
                out.append(f'schema: {label(panel)}: no schema for panel type '
                           f"'{panel.get('type')}' in {schemas.directory} "
                           '(use stat, timeseries or table, or add it)')
                continue
            options, custom, defs = found
            for e in validate(options, defs, panel.get('options', {})):
                out += [f'{panel["type"]}-schema: {line}'
                        for line in describe(e, (*path, 'options'))]
            fc = panel.get('fieldConfig', {})
            defaults = fc.get('defaults', {})
            if custom is None:
                if defaults.get('custom'):
                    out.append(f'{panel["type"]}-schema: /{where}/fieldConfig/defaults/custom: '
                               f"panel type '{panel['type']}' has no custom field config")
            else:
                for e in validate(custom, defs, defaults.get('custom', {})):
                    out += [f'{panel["type"]}-schema: {line}'
                            for line in describe(e, (*path, 'fieldConfig', 'defaults', 'custom'))]
            custom_props = resolve(custom, defs).get('properties', {}) if custom else {}
            for k, o in enumerate(fc.get('overrides', [])):
                for m, prop in enumerate(o.get('properties', [])):
                    at = (*path, 'fieldConfig', 'overrides', k, 'properties', m, 'value')
                    pid = prop.get('id', '')
                    if pid.startswith('custom.'):
                        schema, sdefs = custom_props.get(pid[len('custom.'):]), defs
                    else:
                        schema, sdefs = field_config_props.get(pid), dash_defs
                    if schema is None:
                        out.append(f"{panel['type']}-schema: /{'/'.join(map(str, at[:-1]))}: "
                                   f"unknown field config property '{pid}'")
                        continue
                    for e in validate(schema, sdefs, prop.get('value')):
                        out += [f'{panel["type"]}-schema: {line}' for line in describe(e, at)]
            for t, target in enumerate(panel.get('targets', [])):
                for e in schemas.prometheus.iter_errors(target):
                    out += [f'prometheus-schema: {line}'
                            for line in describe(e, (*path, 'targets', t))]
    return out


# --- PromQL ----------------------------------------------------------------------------------

TOKEN_RE = re.compile(r'''
    (?P<ws>\s+) | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<var>\$\{[^}]+\}|\$\w+|\[\[[^\[\]]+\]\])
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:[a-zA-Z]+\d*)*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}\[\],:@])
''', re.X)
GROUPING_KEYWORDS = {'by', 'without', 'on', 'ignoring', 'group_left', 'group_right'}
BINARY_KEYWORDS = {'and', 'or', 'unless', 'atan2', 'bool', 'offset'}


def tokens(expr):
    pos, out = 0, []
    while pos < len(expr):
        m = TOKEN_RE.match(expr, pos)
        if not m:
            raise ValueError(f'cannot read PromQL at {pos}: {expr[pos:pos + 20]!r}')
        if m.lastgroup not in ('ws', 'comment'):
            out.append((m.lastgroup, m.group()))
        pos = m.end()
    return out


def range_problems(expr):
    """target-rate-interval-rule: a range selector directly inside rate()/irate() is
    [$__rate_interval], and [$__rate_interval] is only used as some function's range."""
    out, stack, prev = [], [], None
    toks = tokens(expr)
    for i, (kind, text) in enumerate(toks):
        if text == '(':
            if prev and prev[0] == 'ident' and prev[1].lower() in GROUPING_KEYWORDS:
                stack.append(('labels', None, i))
            elif prev and prev[0] == 'ident' and prev[1].lower() not in BINARY_KEYWORDS:
                stack.append(('call', prev[1], i))
            else:
                stack.append(('group', None, i))
        elif text in ('{', '['):
            stack.append((text, None, i))
        elif text in (')', '}', ']'):
            opener = {')': ('labels', 'call', 'group'), '}': ('{',), ']': ('[',)}[text]
            if not stack or stack[-1][0] not in opener:
                return [f'unbalanced {text!r} in {expr}']
            _, _, start = stack.pop()
            if text == ']':
                inside = toks[start + 1:i]
                if any(t == ':' for _, t in inside):
                    pass  # a subquery: the linter leaves those alone
                else:
                    rate_var = len(inside) == 1 and inside[0][0] == 'var' and \
                        inside[0][1].strip('${}[]') == '__rate_interval'
                    parent = stack[-1] if stack else None
                    in_rate = parent and parent[0] == 'call' and parent[1] in RATE_FUNCTIONS
                    shown = ''.join(t for _, t in inside)
                    if in_rate and not rate_var:
                        out.append(f'{parent[1]}() over [{shown}], should use [$__rate_interval]')
                    elif rate_var and not (parent and parent[0] == 'call'):
                        out.append('[$__rate_interval] used outside a function call')
        prev = (kind, text)
    if stack:
        out.append(f'unclosed {toks[stack[-1][2]][1]!r} in {expr}')
    return out


def grafana_regex_escape(value):
    """Grafana's prometheusSpecialRegexEscape: the value as a literal inside a =~ "..." matcher
    (backslashes doubled for the PromQL string, regex metacharacters escaped)."""
    value = value.replace('\\', '\\' * 4)
    return re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: '\\\\' + m.group(), value)


def grafana_value(variable, selected):
    """What Grafana's Prometheus data source puts in place of a variable whose current value is
    `selected` (a list of values, or None for "All"), as its interpolateQueryExpr does."""
    if selected is None:
        return variable.get('allValue') or '.*'
    if not variable.get('multi') and not variable.get('includeAll'):
        return selected[0].replace('\\', '\\\\').replace("'", "\\\\'")
    escaped = [grafana_regex_escape(v) for v in selected]
    return escaped[0] if len(escaped) == 1 else '(' + '|'.join(escaped) + ')'


def variable_values(dashboard, selection=None, globals_=None):
    """{name: replacement} for every variable of the dashboard: Grafana's own (`globals_`, default
    GLOBALS) and the dashboard's, each at `selection[name]` (a list of values) or, if not
    selected, at "All". A variable with neither an allValue nor a selection gets a word."""
    values = dict(GLOBALS if globals_ is None else globals_)
    for v in variables_of(dashboard):
        name = v.get('name', '')
        if selection and name in selection:
            values[name] = grafana_value(v, selection[name])
        else:
            values[name] = v.get('allValue') or f'var_{re.sub(r"[^A-Za-z0-9_]", "_", name)}'
    return values


def expand(expr, values):
    """Grafana's substitution of the dashboard's and its own variables; unknown names are kept."""
    def sub(m):
        name = next(g for g in m.groups() if g is not None)
        return values.get(name, m.group())
    return VARIABLE_RE.sub(sub, expr)


def undefined_variables(text, values):
    """Names used as $name that neither the dashboard nor Grafana defines ($1 etc. are
    label_replace's, Grafana leaves them alone)."""
    used = {next(g for g in m.groups() if g is not None) for m in VARIABLE_RE.finditer(text)}
    return sorted(u for u in used - set(values) if not u.isdigit())


def promql_parse_errors(exprs, promtool):
    """{key: error} for each expr that Prometheus' parser refuses (one `promtool check rules`
    over a rule file with one recording rule per expr)."""
    if not exprs:
        return {}
    exe = shutil.which(promtool)
    if exe is None:
        raise SetupError(f'{promtool} not found: it parses the PromQL (scripts/setup installs '
                         'the package prometheus)')
    names = {f'dashboard:expr_{n}': key for n, key in enumerate(exprs)}
    rules = [{'record': name, 'expr': exprs[key]} for name, key in names.items()]
    with tempfile.TemporaryDirectory(prefix='grafana-lint.') as tmp:
        path = os.path.join(tmp, 'dashboard.rules.yml')
        with open(path, 'w', encoding='utf-8') as f:
            json.dump({'groups': [{'name': 'dashboard', 'rules': rules}]}, f)  # JSON is YAML
        r = subprocess.run([exe, 'check', 'rules', '--lint=none', path],
                           capture_output=True, text=True, timeout=60)
    if r.returncode == 0:
        return {}
    errors = {}
    for line in (r.stdout + r.stderr).splitlines():
        m = re.search(r'"(dashboard:expr_\d+)": (.*)', line)
        if m and m.group(1) in names:
            errors[names[m.group(1)]] = m.group(2)
    if not errors:
        raise SetupError('promtool check rules failed without naming a rule:\n'
                         f'{r.stdout}{r.stderr}')
    return errors


# --- the linter's rules ------------------------------------------------------------------------

def lint_problems(d, promtool):
    out = []
    variables = variables_of(d)
    ds_vars = [v for v in variables if v.get('type') == 'datasource']

    # template-datasource-rule: one templated Prometheus data source, named and labelled as the
    # linter wants, so the dashboard works against whatever the Prometheus is called.
    if not ds_vars:
        out.append("template-datasource-rule: no variable of type 'datasource'")
    for v in ds_vars:
        kind = str(v.get('query', ''))
        names = {f'{kind.lower()}_datasource'} | ({'datasource'} if len(ds_vars) == 1 else set())
        labels = {f'{kind.title()} data source'} | ({'Data source'} if len(ds_vars) == 1 else set())
        if kind != 'prometheus':
            out.append(f"template-datasource-rule: variable '{v.get('name')}' has query "
                       f"'{kind}', expected 'prometheus'")
        if v.get('name') not in names:
            out.append(f"template-datasource-rule: variable '{v.get('name')}' should be named "
                       f"{' or '.join(sorted(names))}")
        if v.get('label') not in labels:
            out.append(f"template-datasource-rule: variable '{v.get('name')}' labelled "
                       f"'{v.get('label')}', should be {' or '.join(sorted(labels))}")
    ds_uids = {f'${v.get("name")}' for v in ds_vars} | {f'${{{v.get("name")}}}' for v in ds_vars}

    def uses_templated_ds(ref):
        return (isinstance(ref, dict) and ref.get('uid') in ds_uids
                and ref.get('type') == 'prometheus')

    # Values to parse the queries with: a variable's "All" (its allValue), else a word; and each
    # query once more with a selection, as Grafana puts it in.
    values = variable_values(d)
    selected = variable_values(d, {n: EXAMPLE_SELECTION.get(n, ['example']) for n in
                                   (v.get('name') for v in variables if v.get('type') == 'query')})
    readings = [('', values), (' (variables at a selection)', selected)]

    exprs, where = {}, {}
    for v in variables:
        if v.get('type') != 'query':
            continue
        name = v.get('name')
        # The variables have a data source: the templated one.
        if not uses_templated_ds(v.get('datasource')):
            out.append(f"template-datasource-rule: variable '{name}' should use data source "
                       f"{{type: prometheus, uid: ${{datasource}}}}, has {v.get('datasource')}")
        # template-on-time-change-reload
        if v.get('refresh') != 2:
            out.append(f"template-on-time-change-reload: variable '{name}' has refresh "
                       f"{v.get('refresh')}, should be 2 (on time range change)")
        # template-label-promql-rule
        query = v.get('query')
        if not isinstance(query, str):
            out.append(f"template-label-promql-rule: variable '{name}' query is not a string")
            continue
        if v.get('definition') != query:
            out.append(f"variables: variable '{name}' definition {v.get('definition')!r} differs "
                       f'from its query {query!r} (Grafana runs the query, the e2e test the '
                       'definition)')
        m = re.fullmatch(r'\s*([a-z_]+)\((.*)\)\s*', query, re.S)
        if not m or m.group(1) not in LABEL_FUNCTIONS:
            out.append(f"template-label-promql-rule: variable '{name}' query {query!r} is not "
                       f"one of {', '.join(sorted(LABEL_FUNCTIONS))}(...)")
            continue
        arg = m.group(2)
        if m.group(1) == 'label_values':
            parts = arg.rsplit(',', 1)
            if len(parts) == 2:
                arg = parts[0]
                if not re.fullmatch(r'\s*[A-Za-z_][A-Za-z0-9_]*\s*', parts[1]):
                    out.append(f"template-label-promql-rule: variable '{name}': "
                               f'{parts[1].strip()!r} is not a label name')
        for u in undefined_variables(arg, values):
            out.append(f"variables: variable '{name}' uses undefined ${u}")
        if arg.strip():
            for how, vals in readings:
                key = ('variable', name, how)
                exprs[key] = expand(arg, vals)
                where[key] = f"template-label-promql-rule: variable '{name}'{how}"

    ids = set()
    for p in all_panels(d.get('panels', [])):
        if p.get('type') == 'row':
            continue
        if p.get('id') in ids:
            out.append(f'panels: {label(p)}: duplicate panel id')
        ids.add(p.get('id'))
        targets = p.get('targets') or []
        # panel-title-description-rule, panel-no-targets-rule
        if not p.get('title') or not p.get('description'):
            out.append(f'panel-title-description-rule: {label(p)} needs a title and a description')
        if not targets:
            out.append(f'panel-no-targets-rule: {label(p)} has no targets')
        # panel-datasource-rule: the panel and each of its targets use the templated data source.
        if not uses_templated_ds(p.get('datasource')):
            out.append(f'panel-datasource-rule: {label(p)} should use data source '
                       f"{{type: prometheus, uid: ${{datasource}}}}, has {p.get('datasource')}")
        # panel-units-rule: an override's unit wins over the default's; it must be Grafana's.
        fc = p.get('fieldConfig', {})
        unit = fc.get('defaults', {}).get('unit', '')
        for o in fc.get('overrides', []):
            for prop in o.get('properties', []):
                if prop.get('id') == 'unit':
                    unit = prop.get('value')
        if p.get('type') in QUERY_PANEL_TYPES and unit not in UNITS:
            out.append(f'panel-units-rule: {label(p)} has no or an invalid unit: {unit!r}')
        ref_ids = set()
        for n, t in enumerate(targets):
            tw = f'{label(p)} target {t.get("refId", n)}'
            if t.get('refId') in ref_ids:
                out.append(f'panels: {tw}: duplicate refId')
            ref_ids.add(t.get('refId'))
            if 'datasource' in t and not uses_templated_ds(t['datasource']):
                out.append(f'panel-datasource-rule: {tw} should use the panel\'s templated data '
                           f"source, has {t['datasource']}")
            expr = t.get('expr', '')
            # target-promql-rule
            if not isinstance(expr, str) or not expr.strip():
                out.append(f'target-promql-rule: {tw} has no expr')
                continue
            for u in undefined_variables(expr, values):
                out.append(f'variables: {tw} uses undefined ${u}')
            for how, vals in readings:
                key = ('target', p.get('id'), n, how)
                exprs[key] = expand(expr, vals)
                where[key] = f'target-promql-rule: {tw}{how}'
            # target-rate-interval-rule
            try:
                for problem in range_problems(expr):
                    out.append(f'target-rate-interval-rule: {tw}: {problem}')
            except ValueError as e:
                out.append(f'target-rate-interval-rule: {tw}: {e}')

    errors = promql_parse_errors(exprs, promtool)
    for key, error in errors.items():
        if key[-1] and (*key[:-1], '') in errors:
            continue  # the same query at "All" is refused already: one problem, not two
        out.append(f'{where[key]}: invalid PromQL {exprs[key]!r}: {error}')
    return out


def problems(dashboard, schemas, promtool='promtool'):
    """Every problem of a parsed dashboard, one string each (empty: Grafana would accept it).
    Raises SetupError when it cannot check."""
    d = copy.deepcopy(dashboard)
    if not isinstance(d, dict):
        return ['schema: /: the dashboard is not a JSON object']
    return schema_problems(d, schemas) + lint_problems(d, promtool)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('dashboard', nargs='+')
    ap.add_argument('--schemas', default=os.environ.get('GRAFANA_SCHEMA_DIR', DEFAULT_SCHEMAS))
    ap.add_argument('--promtool', default='promtool')
    args = ap.parse_args(argv)
    try:
        schemas = Schemas(args.schemas)
        failed = False
        for path in args.dashboard:
            with open(path, encoding='utf-8') as f:
                d = json.load(f)
            found = problems(d, schemas, args.promtool)
            for line in found:
                print(f'{path}: {line}')
            panels = [p for p in all_panels(d.get('panels', [])) if p.get('type') != 'row']
            targets = sum(len(p.get('targets', [])) for p in panels)
            print(f'{path}: {"FAILED, " + str(len(found)) + " problems" if found else "ok"} '
                  f'({len(panels)} panels, {targets} targets, {len(variables_of(d))} variables)')
            failed |= bool(found)
    except SetupError as e:
        print(f'cannot check: {e}', file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
