#!/usr/bin/python3
"""Hostile input for build/shmstress (issue 12): a corpus of malformed
scenario files, bad command lines, corrupted trial and run dirs and mutated
histories, each run through the binary. For every case:

- no signal death (no abort, no segfault) and no "internal error" (the
  last-resort catch in main), and no hang (each case has a timeout);
- the expected exit code (DESIGN.md section 8): 2 for bad usage or a bad file,
  with the file and line of a bad scenario ("file:line:") or the flag named;
- for a mutated history, a history error in verdict.json (never a crash), and
  never a passing verdict;
- nothing of it left in the process table (every case runs in a session of
  its own, which must be empty when it returns).
After the whole corpus, /dev/shm holds what it held before.

Usage: hostile_test.py BUILD/shmstress   (from the source tree; about 20 s)
Cases are listed by name with --list; run some with --only SUBSTRING.
"""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

SHMSTRESS = os.path.abspath(sys.argv[1])
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
LIST = "--list" in sys.argv
TMP = tempfile.mkdtemp(prefix="shmstress-hostile-")
CASE_TIMEOUT_S = 20

cases = []  # dicts: name, argv, rc (int or set), stderr (regex), history_error (verdict.json path)


def case(name, argv, rc, stderr=None, history_error=None, setup=None, files=(), error_text=None):
    """history_error: a verdict.json that must list a history error (matching
    the regex error_text, when given); files: files the command must write."""
    cases.append(dict(name=name, argv=[SHMSTRESS] + argv, rc=rc, stderr=stderr,
                      history_error=history_error, setup=setup, files=files,
                      error_text=error_text))


def path(*parts):
    p = os.path.join(TMP, *parts)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    return p


def write(p, data):
    with open(p, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return p


# --- malformed scenario files: exit 2 with file:line --------------------------------

JOB = "[[job]]\nranks = 2\n"  # two lines


def scenario(name, text, line, message=None, filename=None):
    """A scenario file whose error is at `line` (None: the file as a whole)."""
    f = write(path("scenarios", name, filename) if filename else path("scenarios", name + ".toml"),
              text)
    where = re.escape(f) + (":%d: " % line if line is not None else ": ")
    case("scenario/" + name, ["run", f, "--trials", "1", "--out", path("out", name)], 2,
         where + (".*" + message if message else ""))


# TOML syntax
scenario("syntax-unterminated-string", 'name = "abc\n' + JOB, 1, "TOML syntax error")
scenario("syntax-missing-equals", 'name "abc"\n' + JOB, 1, "TOML syntax error")
scenario("syntax-bad-table-header", "[[job]\nranks = 2\n", 1, "TOML syntax error")
scenario("syntax-duplicate-key", "[[job]]\nranks = 2\nranks = 3\n", 3, "TOML syntax error")
scenario("syntax-table-redefined", JOB + "[job]\nranks = 1\n", 3, "TOML syntax error")
scenario("syntax-invalid-escape", 'description = "a\\qb"\n' + JOB, 1, "TOML syntax error")
scenario("syntax-trailing-garbage", "[[job]]\nranks = 2 3\n", 2, "TOML syntax error")
scenario("syntax-integer-overflow", "[[job]]\nranks = 99999999999999999999\n", 2,
         "TOML syntax error")
scenario("syntax-raw-nul-byte", "[[job]]\nranks = 2\n# a\0b\n", 3, "TOML syntax error")
scenario("syntax-invalid-utf8", b'description = "\xff\xfe"\n' + JOB.encode(), 1,
         "TOML syntax error")
scenario("syntax-lone-surrogate-escape", 'description = "\\ud800"\n' + JOB, 1,
         "TOML syntax error")
scenario("syntax-binary-garbage", bytes(range(256)) * 4, 1, "TOML syntax error")
scenario("deep-nesting-arrays", "x = " + "[" * 5000 + "]" * 5000 + "\n" + JOB, 1)
scenario("deep-nesting-inline-tables", "x = " + "{a=" * 2000 + "1" + "}" * 2000 + "\n" + JOB, 1)
scenario("deep-nesting-dotted-keys", ".".join(["a"] * 3000) + " = 1\n" + JOB, 1)

# wrong types, every key
for key, value in [("name", "5"), ("description", "5"), ("invariants", '"prefix.unique"'),
                   ("expect_reached", "5"), ("trials", '"10"'), ("timeout", "true"),
                   ("final_cleanup", '"yes"'), ("subject", "5"), ("deadlines", "5"),
                   ("fault", '"x"')]:
    scenario("type-top-" + key, "%s = %s\n" % (key, value) + JOB, 1, "'%s' must be" % key)
scenario("type-top-job", "job = 5\n", 1, "'job' must be an array of tables")
scenario("type-job-entry", "job = [1, 2]\n", 1, "each 'job' entry must be a table")
for key, value in [("acquire", "true"), ("barrier", "[1]")]:
    scenario("type-deadlines-" + key, "[deadlines]\n%s = %s\n" % (key, value) + JOB, 2,
             "'deadlines.%s' must be" % key)
for key, value in [("count", '"2"'), ("ranks", "1.5"), ("dirs", '"a"'), ("remote", "1"),
                   ("start_jitter", "true"), ("local_world_size", "true"), ("workload", "5")]:
    scenario("type-job-" + key, "[[job]]\n%s = %s\n" % (key, value), 2, "'%s' must" % key)
scenario("type-job-dirs-entry", "[[job]]\ndirs = [1]\n", 2)
for key, value in [("acquire", "1"), ("rounds", '"3"'), ("round_jitter", "[]"), ("hold", "{}"),
                   ("release", '"no"'), ("segments", '"a"'), ("clean_before", "0"),
                   ("clean_after", '"true"'), ("clean_between", '"true"')]:
    scenario("type-workload-" + key, JOB + "[job.workload]\n%s = %s\n" % (key, value), 4,
             "'%s' must" % key)
scenario("type-workload-segments-entry", JOB + "[job.workload]\nsegments = [1]\n", 4)
scenario("type-fault-kind", JOB + "[[fault]]\nkind = 5\n", 4, "'kind' must be")
scenario("type-fault-entry", "fault = [1]\n" + JOB, 1, "each 'fault' entry must be a table")
scenario("type-fault-date", JOB + "[[fault]]\nkind = \"sigkill\"\nat = 1979-05-27\n", 5,
         "dates and times are not supported")

# out-of-range numbers
for name, text, line in [
        ("ranks-zero", "[[job]]\nranks = 0\n", 2), ("ranks-65", "[[job]]\nranks = 65\n", 2),
        ("ranks-negative", "[[job]]\nranks = -1\n", 2),
        ("ranks-int64-max", "[[job]]\nranks = 9223372036854775807\n", 2),
        ("ranks-int64-min", "[[job]]\nranks = -9223372036854775808\n", 2),
        ("count-zero", "[[job]]\ncount = 0\n", 2), ("count-65", "[[job]]\ncount = 65\n", 2),
        ("trials-zero", "trials = 0\n" + JOB, 1), ("trials-huge", "trials = 100001\n" + JOB, 1),
        ("rounds-negative", JOB + "[job.workload]\nrounds = -1\n", 4),
        ("rounds-huge", JOB + "[job.workload]\nrounds = 10001\n", 4),
        ("lws-huge", "[[job]]\nlocal_world_size = 5000\n", 2),
        ("lws-equals-ranks", "[[job]]\nranks = 2\nlocal_world_size = 2\n", 3)]:
    scenario("range-" + name, text, line, "out of range" if "equals" not in name else "equals")
for name, text, line in [
        ("timeout-too-short", 'timeout = "1ms"\n' + JOB, 1),
        ("timeout-too-long", 'timeout = "11m"\n' + JOB, 1),
        ("timeout-no-unit", 'timeout = "20"\n' + JOB, 1),
        ("timeout-range", 'timeout = "1-2s"\n' + JOB, 1),
        ("timeout-bad-unit", 'timeout = "20h"\n' + JOB, 1),
        ("timeout-many-digits", 'timeout = "99999999999999ms"\n' + JOB, 1),
        ("timeout-negative-ms", "timeout = -5\n" + JOB, 1),
        ("deadline-too-short", '[deadlines]\nacquire = "5ms"\n' + JOB, 2),
        ("jitter-too-long", '[[job]]\nstart_jitter = "11m"\n', 2),
        ("jitter-reversed", JOB + '[job.workload]\nround_jitter = "5-1ms"\n', 4),
        ("jitter-two-dashes", JOB + '[job.workload]\nhold = "1-2-3ms"\n', 4),
        ("jitter-fraction-of-ms", JOB + '[job.workload]\nhold = "0.5ms"\n', 4)]:
    scenario("range-" + name, text, line)
scenario("range-too-many-jobs", "[[job]]\ncount = 64\n[[job]]\ncount = 1\n", 3, "too many jobs")
scenario("range-too-many-ranks", "[[job]]\ncount = 5\nranks = 64\n", 1, "too many ranks")
scenario("range-too-many-dirs", "[[job]]\ndirs = [%s]\n" % ", ".join('"d%d"' % i for i in range(17)),
         2)

# unknown keys at every level
scenario("unknown-top", "bogus = 1\n" + JOB, 1, "unknown key 'bogus' at top level")
scenario("unknown-job", JOB + "bogus = 1\n", 3, "unknown key 'bogus' in \\[job\\]")
scenario("unknown-workload", JOB + "[job.workload]\nclean_befor = true\n", 4,
         "unknown key 'clean_befor'")
scenario("unknown-deadlines", "[deadlines]\nacquire_ = \"1s\"\n" + JOB, 2, "unknown key")
scenario("unknown-table", "[bogus]\nx = 1\n" + JOB, 1, "unknown key 'bogus'")

# strings: huge, NUL, names that would leave the run dir
scenario("name-too-long", 'name = "%s"\n' % ("x" * 300) + JOB, 1, "'name' = ")
scenario("name-with-slash", 'name = "../../etc"\n' + JOB, 1, "may only contain")
scenario("name-dotdot", 'name = ".."\n' + JOB, 1, "must not be")
scenario("name-nul-escape", 'name = "a\\u0000b"\n' + JOB, 1,
         re.escape('\'name\' = "a\\x00b" may only contain'))
scenario("name-escape-sequence", 'name = "\\u001b[31mred"\n' + JOB, 1,
         re.escape('\'name\' = "\\x1b[31mred" may only contain'))
scenario("name-empty", 'name = ""\n' + JOB, 1)
scenario("huge-description-then-error", 'description = "%s"\nname = 5\n' % ("x" * (1 << 20)) + JOB,
         2, "'name' must be")
scenario("dirs-entry-empty", '[[job]]\ndirs = [""]\n', 2)
scenario("stem-dotdot", JOB, None, "the file name's stem \"..\" must not be", filename="...toml")

# files that are no scenario at all
scenario("empty-file", "", None, "no \\[\\[job\\]\\]")
scenario("only-comments", "# nothing\n# here\n", None, "no \\[\\[job\\]\\]")
big = path("scenarios", "over-the-cap.toml")
with open(big, "wb") as f:  # sparse: 17 MiB of NUL bytes, none written
    f.truncate(17 << 20)
case("scenario/over-the-cap", ["run", big, "--out", path("out", "big")], 2,
     re.escape(big) + ": cannot read scenario file: is 17825792 bytes, over the 16 MiB limit")
fifo = path("scenarios", "fifo.toml")
os.mkfifo(fifo)
case("scenario/fifo", ["run", fifo, "--out", path("out", "fifo")], 2,
     re.escape(fifo) + ": cannot read scenario file: is a FIFO, not a regular file")
zero = path("scenarios", "zero.toml")
os.symlink("/dev/zero", zero)
case("scenario/symlink-to-dev-zero", ["run", zero, "--out", path("out", "zero")], 2,
     re.escape(zero) + ": cannot read scenario file: is a character device")
case("scenario/dev-urandom", ["run", "/dev/urandom", "--out", path("out", "urandom")], 2,
     "/dev/urandom: cannot read scenario file: is a character device")
case("scenario/proc-self-mem-unreadable", ["run", "/proc/self/mem", "--out", path("out", "mem")],
     2, "/proc/self/mem: cannot read scenario file: Input/output error")
os.makedirs(path("scenarios", "dir.toml", "x"))
case("scenario/directory", ["run", path("scenarios", "dir.toml"), "--out", path("out", "dir")], 2,
     "directory")
loop = path("scenarios", "loop.toml")
os.symlink(loop, loop)
case("scenario/symlink-loop", ["run", loop, "--out", path("out", "loop")], 2, "loop.toml")

# what only the registries know: invariants, states, fault kinds, subjects
scenario("unknown-invariant", 'invariants = ["prefix.uniqe"]\n' + JOB, 1, "prefix.uniqe")
scenario("unknown-expect-reached", 'expect_reached = ["no-such-state"]\n' + JOB, 1,
         "no-such-state")
scenario("expect-reached-bad-error-pattern", 'expect_reached = ["error:acquire"]\n' + JOB, 1,
         "error:acquire")
scenario("expect-reached-unknown-fault-kind", 'expect_reached = ["fault:nosuchkind"]\n' + JOB, 1,
         "nosuchkind")
scenario("fault-unknown-kind", JOB + '[[fault]]\nkind = "nosuch"\n', 3, "unknown fault kind")
scenario("fault-without-kind", JOB + "[[fault]]\nat = \"1ms\"\n", 3, "no 'kind'")
scenario("subject-exec-nonexistent", 'subject = "exec:/nonexistent"\n' + JOB, 1,
         "/nonexistent: No such file or directory")
scenario("subject-exec-empty", 'subject = "exec:"\n' + JOB, 1, "needs a command")
PLAIN = write(path("plain-file"), "not a program\n")
os.chmod(PLAIN, 0o644)
scenario("subject-exec-not-executable", 'subject = "exec:%s"\n' % PLAIN + JOB, 1,
         "not executable")
TEXT_EXEC = write(path("text-exec"), "echo not a program\n")
os.chmod(TEXT_EXEC, 0o755)
scenario("subject-exec-text-without-shebang", 'subject = "exec:%s"\n' % TEXT_EXEC + JOB, 1,
         "neither an ELF binary")
BAD_SHEBANG = write(path("bad-shebang"), "#!/nonexistent/python9\n")
os.chmod(BAD_SHEBANG, 0o755)
scenario("subject-exec-missing-interpreter", 'subject = "exec:%s"\n' % BAD_SHEBANG + JOB, 1,
         "its interpreter /nonexistent/python9")
scenario("subject-unknown-name", 'subject = "nosuch"\n' + JOB, 1, "unknown subject 'nosuch'")
scenario("subject-empty", 'subject = ""\n' + JOB, 1)
# fault parameters of the wrong type or out of range (docs/faults.md)
for name, fault, line in [
        ("emfile-limit-string", 'kind = "emfile"\nlimit = "x"', 5),
        ("fiu-errno-probability-string", 'kind = "fiu-errno"\npoint = "shm/registry/open"\nprobability = "x"', 6),
        ("fiu-errno-errno-array", 'kind = "fiu-errno"\npoint = "shm/registry/open"\nerrno = [1]', 6),
        ("fiu-errno-errno-wraps", 'kind = "fiu-errno"\npoint = "shm/registry/open"\nerrno = 99999999999', 6),
        ("misconfig-what-int", 'kind = "misconfig"\nwhat = 5', 5),
        ("signal-on-event-after-int", 'kind = "signal-on-event"\nafter = 5', 5),
        ("sigkill-count-string", 'kind = "sigkill"\ncount = "x"', 5),
        ("sigkill-at-bad", 'kind = "sigkill"\nat = "soon"', 5),
        ("stale-segment-content-int", 'kind = "stale-segment"\ncontent = 5', 5),
        ("stale-segment-uid-string", 'kind = "stale-segment"\nuid = "x"', 5),
        ("stale-segment-kinds-slash", 'kind = "stale-segment"\nkinds = ["a/b"]', 5),
        ("unprivileged-uid-string", 'kind = "unprivileged"\nuid = "x"', 5),
        ("unprivileged-uid-wraps", 'kind = "unprivileged"\nuid = 4294967297', 5),
        ("crash-point-unknown-point", 'kind = "crash-point"\npoint = "no_such_point"', 5),
        ("crash-point-enumerate-wraps", 'kind = "crash-point"\nenumerate = 4294967297', 5),
        ("enospc-size-zero", 'kind = "enospc"\nsize = "0"', 5)]:
    scenario("fault-" + name, JOB + "[[fault]]\n" + fault + "\n", line)
a = write(path("scenarios", "same-a.toml"), 'name = "same"\n' + JOB)
b = write(path("scenarios", "same-b.toml"), 'name = "same"\n' + JOB)
case("scenario/two-files-one-name", ["run", a, b, "--out", path("out", "same")], 2,
     re.escape(b) + ": scenario name 'same' is also")

# --- bad command lines: exit 2, the flag named --------------------------------------

BASIC = "scenarios/basic.toml"


def cmdline(name, args, message):
    case("cli/" + name, args, 2, message)


cmdline("no-subcommand", [], "subcommand")
cmdline("unknown-subcommand", ["frobnicate"], "subcommand")
cmdline("run-no-files", ["run"], "files")
cmdline("run-missing-file", ["run", "/nonexistent.toml"], "/nonexistent.toml")
for flag, value in [("--trials", "0"), ("--trials", "-1"), ("--trials", "1e3"), ("--trials", "abc"),
                    ("--trials", "99999999999"), ("--trials", "0x10"), ("--trials", " 5"),
                    ("--trials", "5.0"), ("--trials", ""), ("--trial", "-1"), ("--trial", "abc"),
                    ("--trial", "2147483648"), ("--seed", "-1"), ("--seed", "0"),
                    ("--seed", "18446744073709551616"), ("--seed", "+5"), ("--parallel", "0"),
                    ("--parallel", "257"), ("--parallel", "-3"), ("--max-kept", "-1"),
                    ("--max-kept", "1e9")]:
    cmdline("run%s=%s" % (flag, value.strip() or "empty"), ["run", BASIC, flag, value],
            re.escape(flag) + ": expected|" + re.escape(flag) + ": 0 is not a seed")
for value in ["0s", "-5s", "abc", "1-2s", "99999999m", "1.5"]:
    cmdline("run--duration=" + value, ["run", BASIC, "--duration", value], "--duration")
for value in ["1/0", "2/2", "a/b", "-1/2", "1/2x", "1", "0/100001", "2147483648/1"]:
    cmdline("run--shard=" + value, ["run", BASIC, "--shard", value], "--shard")
cmdline("run--push-timeout=forever", ["run", BASIC, "--pushgateway", "http://127.0.0.1:1",
                                      "--push-timeout", "99999m"], "--push-timeout")
cmdline("run--listen=garbage", ["run", BASIC, "--listen", "not an address"], "--listen")
cmdline("run--out=file", ["run", BASIC, "--out", "/etc/hostname"], "--out /etc/hostname: exists")
cmdline("run--out=under-file", ["run", BASIC, "--out", "/etc/hostname/run"], "--out .*not a directory")
cmdline("run--out=proc", ["run", BASIC, "--out", "/proc/shmstress-run"], "--out .*under /proc")
cmdline("run--out=sys", ["run", BASIC, "--out", "/sys/shmstress-run"], "--out .*under /sys")
cmdline("run--subject=exec-nonexistent", ["run", BASIC, "--subject", "exec:/nonexistent"],
        "--subject.*/nonexistent: No such file or directory")
cmdline("run--subject=exec-empty", ["run", BASIC, "--subject", "exec:"], "--subject.*needs a command")
cmdline("run--subject=exec-bare-name", ["run", BASIC, "--subject", "exec:sh"],
        "--subject.*does not search PATH")
cmdline("run--subject=unknown", ["run", BASIC, "--subject", "bogus"], "--subject.*unknown subject")
cmdline("run--worker-bin=not-executable", ["run", BASIC, "--worker-bin", PLAIN],
        "--worker-bin.*not executable")
cmdline("run--worker-bin=fifo", ["run", BASIC, "--worker-bin", fifo], "--worker-bin.*not a regular file")
cmdline("check-missing-dir", ["check", "/nonexistent"], "/nonexistent")
os.makedirs(os.path.join(TMP, "empty-dir"))
cmdline("check-empty-dir", ["check", os.path.join(TMP, "empty-dir")], "no trial dirs")
cmdline("report-a-file", ["report", "/etc/hostname"], "/etc/hostname")
cmdline("replay--times=0", ["replay", TMP, "--times", "0"], "--times")
cmdline("shrink--retries=-1", ["shrink", TMP, "--retries", "-1"], "--retries")
cmdline("shrink--budget=abc", ["shrink", TMP, "--budget", "abc"], "--budget")
cmdline("subject-check-nonexistent", ["subject-check", "/nonexistent"], "/nonexistent")
# merge, baseline and run --baseline read summary.json / baseline files as every stored file is read.
DEV_ZERO_JSON = path("merge", "zero.json")
os.symlink("/dev/zero", DEV_ZERO_JSON)
cmdline("merge-fifo", ["merge", fifo, "--out", path("out", "merge-fifo")], "cannot read: is a FIFO")
cmdline("merge-dev-zero", ["merge", DEV_ZERO_JSON, "--out", path("out", "merge-zero")],
        "cannot read: is a character device")
cmdline("merge-deep", ["merge", write(path("merge", "deep.json"), "[" * 100000 + "]" * 100000),
                       "--out", path("out", "merge-deep")], "nested deeper than 64")
cmdline("baseline-fifo", ["baseline", fifo], "cannot read the baseline: is a FIFO")
case("cli/baseline-wrong-typed-summary",
     ["baseline", write(path("merge", "typed.json"),
                        '{"run_id": 5, "buckets": [{"fingerprint": 3, "trials": "x", "status": 1}]}')],
     {0, 2})
cmdline("run--baseline=dev-zero", ["run", BASIC, "--baseline", DEV_ZERO_JSON],
        "--baseline .*cannot read the baseline: is a character device")
cmdline("subject-check-fifo", ["subject-check", fifo], "not a regular file")
# `list` reads every *.toml under --dir: the ones it cannot read are listed as invalid.
LIST_DIR = os.path.join(TMP, "list-dir")
os.makedirs(os.path.join(LIST_DIR, "d.toml"))
os.mkfifo(os.path.join(LIST_DIR, "fifo.toml"))
os.symlink("/dev/zero", os.path.join(LIST_DIR, "zero.toml"))
os.symlink(os.path.join(LIST_DIR, "loop.toml"), os.path.join(LIST_DIR, "loop.toml"))
write(os.path.join(LIST_DIR, "escape.toml"), 'description = "\\u001b[2Jwiped"\n' + JOB)
case("cli/list-hostile-dir", ["list", "--dir", LIST_DIR], 0)

# --- corrupted trial and run dirs: exit 2 naming the file ---------------------------

BASE_RUN = path("base-run")  # made by one real trial before the cases run (see main)


def trial_copy(name):
    dst = path("trials", name)
    shutil.copytree(BASE_RUN, dst, symlinks=True)
    return dst, os.path.join(dst, "basic", "trial-0")


def corrupt(name, filename, data, commands, message):
    """Copy the base run, replace one file of its trial (or the run's summary.json)."""
    def setup():
        run_dir, trial = trial_copy(name)
        target = os.path.join(run_dir if filename == "summary.json" else trial, filename)
        if os.path.lexists(target):
            os.unlink(target) if not os.path.isdir(target) or os.path.islink(target) \
                else shutil.rmtree(target)
        if callable(data):
            data(target)
        else:
            write(target, data)
    for cmd in commands:
        run_dir = os.path.join(TMP, "trials", name)
        trial = os.path.join(run_dir, "basic", "trial-0")
        argv = {"check": ["check", run_dir], "report": ["report", run_dir],
                "replay": ["replay", trial, "--times", "1"], "shrink": ["shrink", trial]}[cmd]
        case("stored/%s/%s" % (name, cmd), argv, 2, message, setup=setup if cmd == commands[0]
             else None)


def schedule(**override):
    j = {"actions": [], "final_cleanup": True, "run_seed": 5, "scenario": "basic",
         "scenario_file": "scenarios/basic.toml", "seed": 7, "seeds": [], "trial": 0}
    j.update(override)
    return json.dumps({k: v for k, v in j.items() if v is not None})


ALL4 = ["check", "report", "replay", "shrink"]
corrupt("schedule-trial-string", "schedule.json", schedule(trial="abc"), ALL4,
        "schedule.json: /trial: must be an integer")
corrupt("schedule-trial-negative", "schedule.json", schedule(trial=-1), ALL4, "/trial:")
corrupt("schedule-trial-float", "schedule.json", schedule(trial=1.5), ["check", "replay"], "/trial:")
corrupt("schedule-trial-huge", "schedule.json", schedule(trial=2 ** 40), ["check", "replay"],
        "/trial:")
corrupt("schedule-trial-missing", "schedule.json", schedule(trial=None), ["check", "replay"],
        "/trial: is missing")
corrupt("schedule-run-seed-negative", "schedule.json", schedule(run_seed=-5), ["check", "shrink"],
        "/run_seed:")
corrupt("schedule-seed-string", "schedule.json", schedule(seed="7"), ["check"], "/seed:")
corrupt("schedule-scenario-escapes", "schedule.json", schedule(scenario="../../etc"),
        ["check", "replay", "shrink"], "/scenario:")
corrupt("schedule-scenario-file-array", "schedule.json", schedule(scenario_file=["a"]), ["check"],
        "/scenario_file:")
corrupt("schedule-not-json", "schedule.json", "{trial: 0", ["check", "replay"], "not valid JSON")
corrupt("schedule-empty", "schedule.json", "", ["check", "shrink"], "not valid JSON")
corrupt("schedule-truncated", "schedule.json", schedule()[:40], ["report"], "not valid JSON")
corrupt("schedule-array", "schedule.json", "[1,2,3]", ["check"], "must be a JSON object")
corrupt("schedule-deep", "schedule.json", "[" * 100000 + "]" * 100000, ["check"],
        "nested deeper than 64")
corrupt("schedule-nul-bytes", "schedule.json", b"\0" * 100, ["check"], "not valid JSON")
corrupt("schedule-fifo", "schedule.json", lambda p: os.mkfifo(p), ["check", "replay"],
        "schedule.json: cannot read: is a FIFO")
corrupt("schedule-dev-zero", "schedule.json", lambda p: os.symlink("/dev/zero", p), ["check"],
        "schedule.json: cannot read: is a character device")
corrupt("schedule-directory", "schedule.json", lambda p: os.mkdir(p), ["check"],
        "schedule.json: cannot read: is a directory")
corrupt("summary-run-id-number", "summary.json", '{"run_id": 5}', ["report"],
        "summary.json: /run_id: must be a string")
corrupt("summary-reproduce-array", "summary.json",
        '{"violations": [{"trial_dir": "/x", "reproduce": ["a"]}]}', ["report", "replay", "shrink"],
        "summary.json: /violations/0/reproduce: must be a string")
corrupt("summary-violations-object", "summary.json", '{"violations": {}}', ["report"],
        "/violations: must be an array")
corrupt("summary-violation-number", "summary.json", '{"unknown": [5]}', ["report"],
        "/unknown/0: must be an object")
corrupt("summary-trial-dir-number", "summary.json", '{"violations": [{"trial_dir": 7}]}',
        ["report"], "/violations/0/trial_dir:")
corrupt("summary-elapsed-string", "summary.json", '{"elapsed_s": "1s"}', ["report"],
        "/elapsed_s:")
corrupt("summary-subject-null", "summary.json", '{"subject": null}', ["report"], "/subject:")
corrupt("summary-not-json", "summary.json", '{"run_id": ', ["report", "replay"], "not valid JSON")
corrupt("summary-fifo", "summary.json", lambda p: os.mkfifo(p), ["report", "shrink"],
        "summary.json: cannot read: is a FIFO")
corrupt("verdict-checks-object", "verdict.json", '{"checks": {}}', ["replay", "shrink"],
        "verdict.json: /checks: must be an array")
corrupt("verdict-unknown-name", "verdict.json",
        '{"checks": [{"invariant": "prefix.unique", "verdict": "maybe"}]}', ["replay", "shrink"],
        "/checks/0/verdict:")
corrupt("verdict-fifo", "verdict.json", lambda p: os.mkfifo(p), ["replay", "shrink"],
        "verdict.json: cannot read: is a FIFO")
corrupt("trial-scenario-bad-toml", "scenario.toml", "[[job]]\nranks = \n", ALL4,
        "scenario.toml:2: TOML syntax error")
corrupt("trial-scenario-job-not-table", "scenario.toml", "job = [1]\n", ALL4,
        "scenario.toml:1: each 'job' entry must be a table")
corrupt("trial-scenario-fifo", "scenario.toml", lambda p: os.mkfifo(p), ["check", "replay"],
        "scenario.toml: cannot read scenario file: is a FIFO")
corrupt("trial-scenario-dev-zero", "scenario.toml", lambda p: os.symlink("/dev/zero", p),
        ["report", "shrink"], "scenario.toml: cannot read scenario file: is a character device")

# --- mutated histories: a history error in verdict.json, never a crash or a pass -------


def history(name, mutate, rc={1, 4}):
    def setup():
        _, trial = trial_copy("history-" + name)
        p = os.path.join(trial, "history.jsonl")
        with open(p, "rb") as f:
            lines = f.read().decode().splitlines()
        os.unlink(p)
        out = mutate(lines, p)
        if out is not None:
            write(p, out)
    run_dir = os.path.join(TMP, "trials", "history-" + name)
    case("history/" + name, ["check", run_dir], rc, None,
         history_error=os.path.join(run_dir, "basic", "trial-0", "verdict.json"), setup=setup)


def with_line(extra, at=1):
    def mutate(lines, _):
        return "\n".join(lines[:at] + [extra] + lines[at:]) + "\n"
    return mutate


def retype(event_type, key, value):
    """The first event of `event_type` with `key` set to `value` (a JSON text)."""
    def mutate(lines, _):
        for i, l in enumerate(lines):
            e = json.loads(l)
            if e.get("type") == event_type:
                e[key] = json.loads(value)
                lines[i] = json.dumps(e)
                break
        return "\n".join(lines) + "\n"
    return mutate


history("type-is-a-number", with_line('{"t":1,"type":1,"pid":1}'))
history("type-is-an-object", with_line('{"t":1,"type":{},"pid":1}'))
history("unavailable-reason-number", with_line('{"t":1,"type":"subject","available":false,"reason":5}'))
history("trial-phase-number", retype("trial", "phase", "7"))
history("invoke-pid-string", retype("invoke", "pid", '"x"'))
history("invoke-job-out-of-range", retype("invoke", "job", "99"))
history("invoke-rank-negative", retype("invoke", "rank", "-1"))
history("invoke-op-number", retype("invoke", "op", "5"))
history("invoke-id-string", retype("invoke", "id", '"x"'))
history("invoke-t-huge", retype("invoke", "t", "18446744073709551615"))
history("invoke-t-float", retype("invoke", "t", "1e300"))
history("ok-id-string", retype("ok", "id", '"x"'))
history("harness-error-message-array",
        with_line('{"t":1,"type":"harness-error","message":["x"]}'), rc={3, 4})
history("exit-signal-string", retype("exit", "signal", '"KILL"'))
history("not-json-line", with_line("this is not json"))
history("torn-line", with_line('{"t":12,"type":"invoke","pid":'))
history("nul-bytes", with_line("\0" * 64))
history("invalid-utf8", lambda lines, p: ("\n".join(lines) + "\n").encode() + b'{"t":1,"type":"\xff"}\n')
history("deep-nesting", with_line('{"t":1,"type":"invoke","args":' + "[" * 5000 + "]" * 5000 + "}"))
history("one-megabyte-line", with_line('{"t":1,"type":"invoke","op":"' + "x" * (1 << 20) + '"}'))
history("fifo", lambda lines, p: os.mkfifo(p), rc={4})
history("dev-zero", lambda lines, p: os.symlink("/dev/zero", p), rc={4})
history("directory", lambda lines, p: os.mkdir(p), rc={4})
def sparse(size):
    def mutate(lines, p):
        with open(p, "wb") as f:  # sparse: nothing written
            f.truncate(size)
    return mutate


history("over-the-cap", sparse((64 << 20) + 1), rc={4})

# --- a subject that writes malformed events while `run` runs it ---------------------
# The run goes on: the trial gets a history error and an inconclusive (or
# failing) verdict, and the summary, report and JUnit are written.
BAD_SUBJECT = write(path("bad-events-subject"), """#!/bin/sh
# Writes the event named by $1 on the events fd, then exits.
[ -n "$SHMSTRESS_EVENTS_FD" ] || exec 3>>"$SHMSTRESS_EVENTS"
case "$1" in
  type-number) printf '{"t":1,"type":1,"pid":%d}\\n' $$ ;;
  reason-number) printf '{"t":1,"type":"subject","available":false,"reason":5}\\n' ;;
  phase-number) printf '{"t":1,"type":"trial","phase":7}\\n' ;;
  available-string) printf '{"t":1,"type":"subject","available":"no"}\\n' ;;
  message-array) printf '{"t":1,"type":"harness-error","message":["x"]}\\n' ;;
  not-json) printf 'this is not json\\n' ;;
esac >&3
""")
os.chmod(BAD_SUBJECT, 0o755)
for variant, error_text in [
        ("type-number", "needs an integer t and a string type"),
        ("reason-number", "subject reason must be a string"),
        ("phase-number", "trial phase must be start, end, timeout or cut"),
        ("available-string", "subject event needs available: true or false"),
        ("message-array", "harness-error needs a string message"),
        ("not-json", "not JSON: this is not json")]:
    out = path("out", "bad-events-" + variant)
    case("run/subject-writes-" + variant,
         ["run", "scenarios/basic.toml", "--trials", "1", "--seed", "5", "--keep-passing",
          "--subject", "exec:%s %s" % (BAD_SUBJECT, variant), "--out", out,
          "--junit", out + ".junit.xml"],
         {1, 3, 4} if variant == "message-array" else {1, 4},  # it claims a harness error
         history_error=os.path.join(out, "basic", "trial-0", "verdict.json"),
         files=[os.path.join(out, "summary.json"), out + ".junit.xml"], error_text=error_text)

# --- running it -------------------------------------------------------------------------


def session_members(sid):
    """pids whose session is `sid` (every case runs in a session of its own)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # after "pid (comm)": state ppid pgrp session
            out.append(int(d))
    return out


def run_case(c):
    if c["setup"]:
        c["setup"]()
    t0 = time.monotonic()
    p = subprocess.Popen(c["argv"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    problems = []
    try:
        out, err = p.communicate(timeout=CASE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the session we started, nothing else
        out, err = p.communicate()
        problems.append("hung: no answer within %d s" % CASE_TIMEOUT_S)
    elapsed = time.monotonic() - t0
    err = err.decode(errors="replace")
    rc = p.returncode
    left = session_members(p.pid)
    if left:
        problems.append("left processes behind: %s" % left)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if rc < 0:
        problems.append("died by signal %d" % -rc)
    elif rc not in (c["rc"] if isinstance(c["rc"], set) else {c["rc"]}):
        problems.append("exit %d, expected %s" % (rc, c["rc"]))
    if "internal error" in err:
        problems.append("an exception reached main")
    if c["stderr"] and not re.search(c["stderr"], err):
        problems.append("stderr does not match %r" % c["stderr"])
    for f in c["files"]:
        if not os.path.isfile(f):
            problems.append("did not write %s" % f)
    if c["history_error"]:
        try:
            with open(c["history_error"]) as f:
                errors = json.load(f).get("history_errors")
            if not errors:
                problems.append("verdict.json lists no history error")
            elif c["error_text"] and not any(re.search(c["error_text"], e) for e in errors):
                problems.append("no history error matches %r: %s" % (c["error_text"], errors))
        except (OSError, ValueError) as e:
            problems.append("no readable verdict.json: %s" % e)
    return problems, rc, err, elapsed


def main():
    selected = [c for c in cases if not ONLY or ONLY in c["name"]]
    if LIST:
        for c in selected:
            print(c["name"])
        return 0
    shm_before = set(os.listdir("/dev/shm"))
    base = subprocess.run([SHMSTRESS, "run", "scenarios/basic.toml", "--trials", "1", "--seed", "5",
                           "--keep-passing", "--out", BASE_RUN], capture_output=True,
                          timeout=120, start_new_session=True)
    # 4: basic's expected states need more than one trial under load (not this
    # fixture's point: it only stores a trial dir for the cases below).
    if base.returncode not in (0, 4) or not os.path.exists(os.path.join(BASE_RUN, "basic", "trial-0",
                                                               "history.jsonl")):
        print("FAIL: the base run for the stored-dir cases failed:\n" + base.stderr.decode())
        return 1
    failed = 0
    slowest = (0, "")
    for c in selected:
        problems, rc, err, elapsed = run_case(c)
        slowest = max(slowest, (elapsed, c["name"]))
        if problems:
            failed += 1
            print("FAIL %s: %s\n  argv: %s\n  stderr: %s" % (
                c["name"], "; ".join(problems), " ".join(c["argv"][1:])[:300],
                err.strip().replace("\n", "\n          ")[:600]))
    shm_after = set(os.listdir("/dev/shm"))
    if shm_after != shm_before:
        failed += 1
        print("FAIL /dev/shm changed: new %s, gone %s" % (sorted(shm_after - shm_before),
                                                         sorted(shm_before - shm_after)))
    print("hostile inputs: %d cases, %d failed (slowest %.2f s: %s)" % (
        len(selected), failed, slowest[0], slowest[1]))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
