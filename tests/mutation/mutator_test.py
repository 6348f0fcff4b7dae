"""scripts/mutation's generator and judge (label unit, a few seconds).

Each operator's exact output on a fixture (tests/mutation/fixture.cc), nothing
mutated in comments, strings, preprocessor or failpoint lines, patches that
`patch -p1` applies to give exactly the mutated text, a seed that decides the
sample and nothing else, and the verdict rules of a run.
"""

import difflib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
_loader = importlib.machinery.SourceFileLoader("mutation", os.path.join(ROOT, "scripts", "mutation"))
_spec = importlib.util.spec_from_loader("mutation", _loader)
mutation = importlib.util.module_from_spec(_spec)
_loader.exec_module(mutation)

with open(os.path.join(HERE, "fixture.cc"), encoding="utf-8") as _fh:
    FIXTURE = _fh.read()

# (operator, line, removed line, added line or None): every mutant of the fixture, in order.
EXPECTED = [
    ("const-change", 4, "constexpr int kSlots = 64;", "constexpr int kSlots = 32;"),
    ("const-change", 5, "constexpr auto kPoll = std::chrono::milliseconds(20);",
     "constexpr auto kPoll = std::chrono::milliseconds(10);"),
    ("rel-negate", 11, "  if (a <= 10) return 1;", "  if (a > 10) return 1;"),
    ("rel-boundary", 11, "  if (a <= 10) return 1;", "  if (a < 10) return 1;"),
    ("lit-boundary", 11, "  if (a <= 10) return 1;", "  if (a <= 11) return 1;"),
    ("lit-boundary", 11, "  if (a <= 10) return 1;", "  if (a <= 9) return 1;"),
    ("return-del", 11, "  if (a <= 10) return 1;", "  if (a <= 10) {}"),
    ("errno-invert", 12, "  if (errno == EINTR || b != 0) {", "  if (errno != EINTR || b != 0) {"),
    ("logic-flip", 12, "  if (errno == EINTR || b != 0) {", "  if (errno == EINTR && b != 0) {"),
    ("eq-flip", 12, "  if (errno == EINTR || b != 0) {", "  if (errno == EINTR || b == 0) {"),
    ("lit-boundary", 12, "  if (errno == EINTR || b != 0) {", "  if (errno == EINTR || b != 1) {"),
    ("return-del", 13, "    return 2;", None),
    ("call-del", 15, "  w.store(a, std::memory_order_release);", None),
    ("memory-order", 15, "  w.store(a, std::memory_order_release);", "  w.store(a, std::memory_order_relaxed);"),
    ("call-del", 16, '  notify(a, "x > y");', None),
    ("rel-negate", 18, "  return a >= b;", "  return a < b;"),
    ("rel-boundary", 18, "  return a >= b;", "  return a > b;"),
]


def one_line_change(text, mutated):
    d = [l for l in difflib.unified_diff(text.splitlines(), mutated.splitlines(), n=0, lineterm="")
         if l[:1] in "+-" and l[:3] not in ("---", "+++")]
    removed = [l[1:] for l in d if l.startswith("-")]
    added = [l[1:] for l in d if l.startswith("+")]
    assert len(removed) == 1 and len(added) <= 1, d
    return removed[0], (added[0] if added else None)


def apply_patch(root, patch_text):
    subprocess.run(["patch", "-s", "-p1", "-d", root], input=patch_text.encode(), check=True)


class Operators(unittest.TestCase):
    def test_each_operator_makes_exactly_its_change_on_the_fixture(self):
        got = []
        for m in mutation.mutants_of("lib/src/fixture.cc", FIXTURE):
            removed, added = one_line_change(FIXTURE, m.mutated())
            got.append((m.op, m.line, removed, added))
        self.assertEqual(got, EXPECTED)

    def test_every_operator_is_exercised_by_the_fixture(self):
        self.assertEqual({e[0] for e in EXPECTED}, set(mutation.OPERATORS))

    def test_comments_strings_preprocessor_and_failpoint_lines_are_never_mutated(self):
        lines = {m.line for m in mutation.mutants_of("lib/src/fixture.cc", FIXTURE)}
        # 1-2 preprocessor, 6-7 comments, 8-9 string and char literals, 17 a failpoint.
        self.assertFalse(lines & {1, 2, 6, 7, 8, 9, 17}, sorted(lines))

    def test_templates_and_rvalue_refs_are_not_operators(self):
        text = "void g(std::vector<std::pair<int, int>> v, T&& t, std::atomic<int>& a) {\n  h(std::move(t));\n}\n"
        self.assertEqual([(m.op, m.desc) for m in mutation.mutants_of("lib/src/t.cc", text)],
                         [("call-del", "removed `h(std::move(t));`")])

    def test_a_return_in_a_lambda_or_loop_is_not_an_if_guard(self):
        text = ("int g(int n) {\n  auto f = [&] { return n; };\n  for (;;) return 1;\n"
                "  while (n) {\n    return 2;\n  }\n  return f();\n}\n")
        self.assertEqual([m for m in mutation.mutants_of("lib/src/t.cc", text) if m.op == "return-del"], [])

    def test_a_call_split_over_lines_is_removed_whole_and_a_chain_counts_as_one_call(self):
        text = "void g() {\n  a.b(1,\n      2);\n  std::atomic_ref<int>(x).store(1);\n}\n"
        got = [(m.op, m.line, m.mutated()) for m in mutation.mutants_of("lib/src/t.cc", text)]
        self.assertEqual(got, [
            ("call-del", 2, "void g() {\n  std::atomic_ref<int>(x).store(1);\n}\n"),
            ("call-del", 4, "void g() {\n  a.b(1,\n      2);\n}\n"),
        ])

    def test_a_multi_line_failpoint_statement_is_skipped_whole(self):
        text = ("int g(int a) {\n  if (int e = failpoint::check(\"x\"))\n    return e + (a < 1);\n"
                "  failpoint::crash_window(\n      \"y\");\n  return 0;\n}\n")
        self.assertEqual([m.line for m in mutation.mutants_of("lib/src/t.cc", text)], [])


class Patches(unittest.TestCase):
    def test_each_patch_applies_with_patch_p1_and_gives_the_mutated_text(self):
        with tempfile.TemporaryDirectory(prefix="mutation-test.") as tmp:
            for m in mutation.mutants_of("lib/src/fixture.cc", FIXTURE):
                tree = os.path.join(tmp, m.id)
                os.makedirs(os.path.join(tree, "lib", "src"))
                with open(os.path.join(tree, "lib", "src", "fixture.cc"), "w", encoding="utf-8") as fh:
                    fh.write(FIXTURE)
                p = m.patch()
                self.assertIn("diff -ruN a/lib/src/fixture.cc b/lib/src/fixture.cc\n--- a/lib/src/fixture.cc\n"
                              "+++ b/lib/src/fixture.cc\n@@ ", p)
                apply_patch(tree, p)
                with open(os.path.join(tree, "lib", "src", "fixture.cc"), encoding="utf-8") as fh:
                    self.assertEqual(fh.read(), m.mutated(), m.id)

    def test_one_real_mutant_per_operator_applies_to_lib_src(self):
        picked = mutation.sample(mutation.all_mutants(), len(mutation.OPERATORS), seed=1)
        self.assertEqual({m.op for m in picked}, set(mutation.OPERATORS))
        with tempfile.TemporaryDirectory(prefix="mutation-test.") as tmp:
            for m in picked:
                tree = os.path.join(tmp, m.id)
                shutil.copytree(os.path.join(ROOT, "lib", "src"), os.path.join(tree, "lib", "src"))
                apply_patch(tree, m.patch())
                with open(os.path.join(tree, m.file), encoding="utf-8") as fh:
                    self.assertEqual(fh.read(), m.mutated(), m.id)


class RealSource(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.muts = mutation.all_mutants()

    def test_test_files_and_the_failpoint_hook_are_not_mutated(self):
        files = {m.file for m in self.muts}
        self.assertFalse({f for f in files if f.endswith("_test.cc")})
        self.assertNotIn("lib/src/failpoint.cc", files)

    def test_no_mutant_touches_a_comment_string_or_failpoint_line(self):
        masks = {}
        for m in self.muts:
            if m.file not in masks:
                masks[m.file] = mutation.code_mask(m.text)
            code = masks[m.file]
            if m.op in ("call-del", "return-del"):  # a statement: begins in code, ends at a code ;
                c = code[m.start:m.end].strip()
                self.assertEqual(c[:1], m.text[m.start:m.end].strip()[:1], m.id)
                self.assertEqual(c[-1:], ";", m.id)
            else:  # a token: all of it is code
                self.assertEqual(code[m.start:m.end], m.text[m.start:m.end], m.id)
            line = m.text.splitlines()[m.line - 1]
            self.assertNotIn("failpoint::", line, m.id)

    def test_ids_are_unique_and_name_only_target_safe_characters(self):
        ids = [m.id for m in self.muts]
        self.assertEqual(len(ids), len(set(ids)))
        for i in ids:
            self.assertRegex(i, r"^[a-z_]+-[a-z-]+-[0-9a-f]{6}$")

    def test_generation_is_the_same_every_time(self):
        again = mutation.all_mutants()
        self.assertEqual([(m.id, m.start, m.end, m.repl) for m in self.muts],
                         [(m.id, m.start, m.end, m.repl) for m in again])


class Sampling(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.muts = mutation.all_mutants()

    def test_the_same_seed_gives_the_same_sample(self):
        a = [m.id for m in mutation.sample(self.muts, 60, seed=7)]
        b = [m.id for m in mutation.sample(mutation.all_mutants(), 60, seed=7)]
        self.assertEqual(a, b)
        self.assertEqual(len(a), 60)

    def test_another_seed_gives_another_sample(self):
        a = [m.id for m in mutation.sample(self.muts, 60, seed=7)]
        b = [m.id for m in mutation.sample(self.muts, 60, seed=8)]
        self.assertNotEqual(a, b)

    def test_a_sample_is_spread_over_operators_and_files(self):
        s = mutation.sample(self.muts, 60, seed=3)
        per_op = {}
        for m in s:
            per_op.setdefault(m.op, set()).add(m.file)
        self.assertEqual(set(per_op), set(mutation.OPERATORS))
        counts = sorted(sum(m.op == op for m in s) for op in mutation.OPERATORS)
        # An operator with fewer mutants than its share gives them all; the rest share evenly.
        small = sum(1 for m in self.muts if m.op == "errno-invert")
        self.assertLessEqual(counts[-1] - counts[1], 1, counts)
        self.assertLessEqual(counts[0], small)
        # rel-negate spans many files: its 6-7 picks come from as many files.
        self.assertGreaterEqual(len(per_op["rel-negate"]), 6)

    def test_no_sample_is_everything_in_order(self):
        self.assertEqual(mutation.sample(self.muts, None, seed=1), self.muts)


class Judging(unittest.TestCase):
    def test_a_violation_is_a_kill_with_its_first_trials_invariants_and_the_runs_time(self):
        s = {"elapsed_s": 3.25, "violations": [
            {"invariant": "prefix.unique", "scenario": "many-jobs", "trial": 4},
            {"invariant": "cleanup.safety", "scenario": "many-jobs", "trial": 4},
            {"invariant": "barrier.safety", "scenario": "replacement", "trial": 1}]}
        self.assertEqual(mutation.judge(1, s),
                         ("killed", "cleanup.safety, prefix.unique", 3.25, "many-jobs trial 4", ""))

    def test_no_violation_is_survived_also_when_states_were_not_reached_in_the_budget(self):
        self.assertEqual(mutation.judge(0, {"elapsed_s": 20.0})[0], "survived")
        r = mutation.judge(4, {"elapsed_s": 20.0, "missing_reached": ["a", "b"]})
        self.assertEqual((r[0], r[4]), ("survived", "2 expected state(s) not reached"))

    def test_a_survivor_names_the_expected_states_it_lost_against_the_control(self):
        r = mutation.judge(4, {"elapsed_s": 20.0, "missing_reached": ["a: x", "b: y"]}, control_missing=["b: y"])
        self.assertEqual((r[0], r[4]), ("survived", "2 expected state(s) not reached; lost against the control: a: x"))
        r = mutation.judge(4, {"elapsed_s": 20.0, "missing_reached": ["b: y"]}, control_missing=["b: y"])
        self.assertEqual(r[4], "1 expected state(s) not reached")

    def test_unknown_verdicts_without_a_violation_are_inconclusive(self):
        r = mutation.judge(4, {"elapsed_s": 20.0, "unknown": [{"invariant": "barrier.liveness"}]})
        self.assertEqual((r[0], r[4]), ("inconclusive", "unknown: barrier.liveness"))

    def test_a_harness_failure_or_a_hang_is_not_a_kill(self):
        self.assertEqual(mutation.judge(3, {"elapsed_s": 1.0})[0], "harness error")
        self.assertEqual(mutation.judge(1, None)[0], "harness error")
        self.assertEqual(mutation.judge(None, None, timed_out=True)[0], "timed out")
        self.assertEqual(mutation.judge(4, {"elapsed_s": 1.0, "interrupted": True})[0], "harness error")

    def test_the_control_is_clean_only_without_violations_unknowns_errors_or_interruption(self):
        self.assertEqual(mutation.control_clean(0, {"trials": 9}), (True, ""))
        self.assertEqual(mutation.control_clean(4, {"missing_reached": ["x"]}), (True, ""))
        self.assertFalse(mutation.control_clean(1, {"violations": [{"invariant": "prefix.unique"}]})[0])
        self.assertFalse(mutation.control_clean(4, {"unknown": [{"invariant": "ops.explained"}]})[0])
        self.assertFalse(mutation.control_clean(3, {})[0])
        self.assertFalse(mutation.control_clean(4, {"interrupted": True})[0])
        self.assertFalse(mutation.control_clean(0, None)[0])

    def test_the_score_leaves_out_equivalents_and_mutants_that_do_not_build(self):
        rows = [{"result": r} for r in ["killed", "killed", "survived", "equivalent", "does not build", "timed out"]]
        self.assertEqual(mutation.score_line(rows),
                         "score: 2 killed / (6 total - 1 equivalent - 1 not built) = 2/4 = 50%")

    def test_equivalents_need_a_reason_each(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
            fh.write("# reviewed\n\nlease-eq-flip-abcdef only reached with fd 0 closed\n")
        try:
            self.assertEqual(mutation.read_equivalents(fh.name), {"lease-eq-flip-abcdef": "only reached with fd 0 closed"})
            with open(fh.name, "a") as out:
                out.write("barrier-call-del-123456\n")
            with self.assertRaisesRegex(ValueError, r":4: `barrier-call-del-123456` has no reason"):
                mutation.read_equivalents(fh.name)
        finally:
            os.unlink(fh.name)

    def test_the_checked_in_equivalents_file_parses_and_names_todays_mutants(self):
        eq = mutation.read_equivalents(os.path.join(ROOT, "scripts", "mutation-equivalents.txt"))
        ids = {m.id for m in mutation.all_mutants()}
        self.assertEqual(sorted(set(eq) - ids), [])


@unittest.skipUnless(shutil.which("g++") and shutil.which("objcopy"), "needs g++ and objcopy")
class CompiledEquivalence(unittest.TestCase):
    """A mutant is excused as equivalent, without a run, only when its object
    file is the unmutated one's but for debug information."""

    SRC = "int f(int a) {\n  if (a <= 10) return 1;\n  return a * 3;\n}\n"

    def compile(self, tmp, name, text):
        src = os.path.join(tmp, name + ".cc")
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(text)
        obj = os.path.join(tmp, name, "f.cc.o")  # one basename, as a mutant's copy has
        os.makedirs(os.path.dirname(obj))
        subprocess.run(["g++", "-O2", "-g", "-c", src, "-o", obj], check=True)
        return obj

    def test_a_change_that_moves_only_lines_is_the_same_object_code(self):
        with tempfile.TemporaryDirectory() as tmp:
            a = self.compile(tmp, "a", self.SRC)
            b = self.compile(tmp, "b", "\n\n" + self.SRC)  # debug line numbers differ
            self.assertTrue(mutation.same_object_code(a, b))

    def test_a_changed_boundary_is_other_object_code(self):
        with tempfile.TemporaryDirectory() as tmp:
            a = self.compile(tmp, "a", self.SRC)
            b = self.compile(tmp, "b", self.SRC.replace("a <= 10", "a < 10"))
            self.assertFalse(mutation.same_object_code(a, b))

    def test_a_missing_object_is_never_equivalent(self):
        with tempfile.TemporaryDirectory() as tmp:
            a = self.compile(tmp, "a", self.SRC)
            self.assertFalse(mutation.same_object_code(a, os.path.join(tmp, "absent.o")))
            self.assertFalse(mutation.same_object_code(a, None))

    def test_the_objects_compared_are_the_mutants_copy_and_the_shared_base(self):
        with tempfile.TemporaryDirectory() as tmp:
            cf = os.path.join(tmp, "tests", "mutants", "CMakeFiles")
            mut = os.path.join(cf, "shmstress-worker-barrier-eq-flip-123456.dir", "barrier-eq-flip-123456", "lib",
                               "src", "barrier.cc.o")
            base = os.path.join(cf, "mutbase_barrier.dir", "__", "__", "lib", "src", "barrier.cc.o")
            other = os.path.join(cf, "mutbase_lease.dir", "__", "__", "lib", "src", "lease.cc.o")
            for p in (mut, base, other):
                os.makedirs(os.path.dirname(p))
                open(p, "w").close()
            self.assertEqual(mutation.mutant_objects(tmp, "barrier-eq-flip-123456", "lib/src/barrier.cc"), (mut, base))
            self.assertEqual(mutation.mutant_objects(tmp, "lease-eq-flip-654321", "lib/src/lease.cc"), (None, other))


if __name__ == "__main__":
    unittest.main()
