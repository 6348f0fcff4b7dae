#!/usr/bin/python3
"""Hostile input II (issue 24) for build/shmstress: what the tool grew since
issue 12, tried as an attacker and as a clumsy user would. Each case is a
small program that sets the stage, runs the binary and says what went wrong;
the classes, most severe first:

  destroy   it destroys or removes what is not its own (output paths that are
            devices, FIFOs or someone else's symlinks; subject-check's scratch
            dir; `clean` against a live run in another pid namespace; two runs
            on one --out; an exec: subject's cwd; a segment escaped into the
            shared /dev/shm)
  green     it goes green on nothing
  signal    it loses its reports to a signal
  believe   it believes what a subject says
  also      the rest (replay of a stored command, log caps, merge, baseline)

Every case runs the binary in a session of its own (nothing may be left in it
when it returns) with a timeout. The cases that aim at /dev (the real
/dev/null, /dev/full, /dev/stdout) run the binary in a private mount namespace
whose /dev is a bind mount of a scratch copy, so that even a binary that gets
it wrong cannot touch the machine's own devices: the test runs as root and
must be safe against the code it is meant to catch. /dev/shm must hold after
the corpus what it held before.

Usage: hostile2_test.py BUILD/shmstress [--only SUBSTRING] [--list]
"""
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

SHMSTRESS = os.path.abspath(sys.argv[1])
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
LIST = "--list" in sys.argv
TMP = tempfile.mkdtemp(prefix="shmstress-hostile2-")
CASE_TIMEOUT_S = 40

CASES = []  # (name, function returning a list of problems)


def case(name):
    def deco(fn):
        CASES.append((name, fn))
        return fn
    return deco


def path(*parts):
    p = os.path.join(TMP, *parts)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    return p


def write(p, data, mode=None):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    if mode is not None:
        os.chmod(p, mode)
    return p


def read(p):
    with open(p, "rb") as f:
        return f.read().decode(errors="replace")


def session_members(sid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:
            out.append(int(d))
    return out


def session_gone(sid, within_s=3.0):
    """The session's members still there after `within_s`: a trial killed with
    the harness dies asynchronously (its pid namespace's init takes its
    processes with it), so its processes get a moment to go."""
    deadline = time.monotonic() + within_s
    while True:
        left = session_members(sid)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


class Result:
    def __init__(self, rc, out, err, elapsed, left):
        self.rc, self.out, self.err, self.elapsed, self.left = rc, out, err, elapsed, left

    def __repr__(self):
        return "exit %s after %.1f s; stderr: %s" % (self.rc, self.elapsed, self.err.strip()[-600:])


def start(argv, cwd=None, env=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE, fakedev=None):
    """Starts argv (SHMSTRESS prepended) in a session of its own. With
    fakedev, in a private mount namespace whose /dev is that directory."""
    full = [SHMSTRESS] + argv
    if fakedev:
        full = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                'mount --bind "$0" /dev && exec "$@"', fakedev] + full
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.Popen(full, cwd=cwd, env=e, stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=stderr, start_new_session=True)


def finish(p, timeout=CASE_TIMEOUT_S, t0=None):
    t0 = t0 or time.monotonic()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        err = (err or b"") + b"\n[hostile2: HUNG, killed after %d s]" % timeout
    left = session_gone(p.pid)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    dec = lambda b: (b or b"").decode(errors="replace")
    return Result(p.returncode, dec(out), dec(err), time.monotonic() - t0, left)


def run(argv, **kw):
    timeout = kw.pop("timeout", CASE_TIMEOUT_S)
    t0 = time.monotonic()
    return finish(start(argv, **kw), timeout, t0)


def expect(r, rc, stderr=None, problems=None):
    """The common checks: no hang, no signal death, no internal error, nothing
    left in the session, the exit code(s), stderr matching."""
    problems = problems if problems is not None else []
    if "HUNG" in r.err:
        problems.append("hung")
    if r.rc is not None and r.rc < 0:
        problems.append("died by signal %d" % -r.rc)
    if "internal error" in r.err:
        problems.append("an exception reached main")
    if r.left:
        problems.append("left processes behind: %s" % r.left)
    rcs = rc if isinstance(rc, (set, tuple, list)) else {rc}
    if r.rc not in rcs:
        problems.append("exit %s, expected %s" % (r.rc, sorted(rcs)))
    if stderr and not re.search(stderr, r.err):
        problems.append("stderr does not match %r" % stderr)
    return problems


def node(p):
    """(kind, inode, rdev) of what is at p, not following a last symlink."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return ("absent", 0, 0)
    kinds = [(stat.S_ISLNK, "symlink"), (stat.S_ISCHR, "chr"), (stat.S_ISBLK, "blk"),
             (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "sock"), (stat.S_ISDIR, "dir"),
             (stat.S_ISREG, "file")]
    kind = next(k for test, k in kinds if test(st.st_mode))
    return (kind, st.st_ino, st.st_rdev)


def unchanged(p, before, problems):
    after = node(p)
    if after != before:
        problems.append("%s was %s, is now %s" % (p, before, after))


QUICK = write(path("scenarios", "quick.toml"), """
description = "one job, one rank: acquire, a round, release"
trials = 1
timeout = "20s"
[[job]]
ranks = 1
dirs = ["/data/{job}"]
remote = true
[job.workload]
acquire = true
rounds = 1
release = true
""")


def quick_run(out, *extra, **kw):
    return run(["run", QUICK, "--seed", "7", "--out", out] + list(extra), **kw)


# A scratch /dev: the devices a run needs and the ones the cases aim at,
# bind-mounted over /dev in the binary's own mount namespace.
FAKEDEV = os.path.join(TMP, "fakedev")


def make_fakedev():
    os.makedirs(os.path.join(FAKEDEV, "shm"))
    os.chmod(os.path.join(FAKEDEV, "shm"), 0o1777)
    for name, (major, minor) in {"null": (1, 3), "zero": (1, 5), "full": (1, 7),
                                 "random": (1, 8), "urandom": (1, 9)}.items():
        os.mknod(os.path.join(FAKEDEV, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    for name, target in {"stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
                         "stderr": "/proc/self/fd/2", "fd": "/proc/self/fd"}.items():
        os.symlink(target, os.path.join(FAKEDEV, name))


# --- destroy: output paths ------------------------------------------------------------


def dev_case(name, flag, device, rc, stderr=None):
    @case("destroy/%s-%s" % (flag.strip("-"), name))
    def _():
        p = os.path.join(FAKEDEV, device)
        before = node(p)
        r = quick_run(path("out", "dev-" + name + flag), flag, "/dev/" + device, fakedev=FAKEDEV)
        problems = expect(r, rc, stderr)
        unchanged(p, before, problems)
        return problems


dev_case("dev-null", "--junit", "null", 0)
dev_case("dev-null", "--metrics-file", "null", 0)
dev_case("dev-full", "--junit", "full", 3, "No space left on device")
dev_case("dev-random", "--junit", "random", 2, "character device")
dev_case("dev-stdout-pipe", "--junit", "stdout", 0)
dev_case("dev-stderr", "--metrics-file", "stderr", 0)


@case("destroy/junit-dev-stdout-redirected-to-a-file-keeps-the-console")
def _():
    console = path("console.txt")
    before = node(os.path.join(FAKEDEV, "stdout"))
    with open(console, "wb") as f:
        r = finish(start(["run", QUICK, "--seed", "7", "--out", path("out", "stdout-file"),
                          "--junit", "/dev/stdout"], fakedev=FAKEDEV, stdout=f))
    problems = expect(r, 0)
    unchanged(os.path.join(FAKEDEV, "stdout"), before, problems)
    text = read(console)
    if "verdict valid" not in text:
        problems.append("the console output before the JUnit XML is gone: %r" % text[:200])
    if "<testsuites" not in text:
        problems.append("no JUnit XML on stdout")
    return problems


@case("destroy/junit-dev-fd-1")
def _():
    r = quick_run(path("out", "dev-fd-1"), "--junit", "/dev/fd/1", fakedev=FAKEDEV)
    problems = expect(r, 0)
    if "<testsuites" not in r.out:
        problems.append("no JUnit XML on stdout: %r" % r.out[-300:])
    return problems


@case("destroy/junit-chardev-node-elsewhere")
def _():
    p = path("nodes", "random")
    os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(1, 8))  # /dev/random: harmless if written to
    before = node(p)
    r = quick_run(path("out", "chardev"), "--junit", p)
    problems = expect(r, 2, re.escape(p) + ": is a character device")
    unchanged(p, before, problems)
    if os.path.exists(path("out", "chardev", "summary.json")):
        problems.append("refused only after the run: it should be refused before any trial")
    return problems


@case("destroy/junit-fifo-with-a-reader")
def _():
    p = path("fifos", "reader")
    os.mkfifo(p)
    got = []
    def reader():
        with open(p, "rb") as f:  # blocks until the writer opens
            got.append(f.read())
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    time.sleep(0.05)  # the reader is in open(): a writer may come
    before = node(p)
    r = quick_run(path("out", "fifo-reader"), "--junit", p)
    problems = expect(r, 0)
    t.join(5)
    unchanged(p, before, problems)
    if not got or b"<testsuites" not in got[0]:
        problems.append("the reader got no JUnit XML")
    if t.is_alive():  # unblock it
        with open(p, "wb"):
            pass
    return problems


@case("destroy/junit-fifo-nobody-reads")
def _():
    p = path("fifos", "lonely")
    os.mkfifo(p)
    before = node(p)
    r = quick_run(path("out", "fifo-lonely"), "--junit", p, timeout=20)
    problems = expect(r, 2, "FIFO that nobody reads")
    unchanged(p, before, problems)
    return problems


@case("destroy/junit-socket")
def _():
    p = path("socks", "s")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(p)
    before = node(p)
    r = quick_run(path("out", "socket"), "--junit", p)
    s.close()
    problems = expect(r, 2, "socket")
    unchanged(p, before, problems)
    return problems


@case("destroy/junit-directory")
def _():
    p = path("junit-dir", "x")
    os.makedirs(p, exist_ok=True)
    before = node(p)
    r = quick_run(path("out", "jdir"), "--junit", p)
    problems = expect(r, 2, "is a directory")
    unchanged(p, before, problems)
    return problems


def victim():
    return write(path("victims", "passwd-%d" % time.monotonic_ns()), "root:x:0:0:root:/root:/bin/sh\n")


@case("destroy/out-summary-json-symlink-to-a-victim")
def _():
    v = victim()
    out = path("out", "symlinked-summary")
    os.makedirs(out)
    os.symlink(v, os.path.join(out, "summary.json"))
    r = quick_run(out)
    problems = expect(r, 2, "symbolic link")
    if read(v) != "root:x:0:0:root:/root:/bin/sh\n":
        problems.append("the file the symlink names was overwritten")
    return problems


@case("destroy/check-verdict-json-symlink-to-a-victim")
def _():
    out = path("out", "verdict-victim")
    r = quick_run(out, "--keep-passing")
    problems = expect(r, 0)
    v = victim()
    trial = os.path.join(out, "quick", "trial-0")
    os.unlink(os.path.join(trial, "verdict.json"))
    os.symlink(v, os.path.join(trial, "verdict.json"))
    r = run(["check", out])
    expect(r, {0, 1, 2, 3, 4}, None, problems)
    if read(v) != "root:x:0:0:root:/root:/bin/sh\n":
        problems.append("check overwrote the file verdict.json's symlink names")
    return problems


@case("destroy/report-timeline-symlink-to-a-victim")
def _():
    out = path("out", "timeline-victim")
    r = quick_run(out, "--keep-passing")
    problems = expect(r, 0)
    v = victim()
    trial = os.path.join(out, "quick", "trial-0")
    os.symlink(v, os.path.join(trial, "timeline.html"))
    r = run(["report", out, "--all"])
    expect(r, {0, 2, 3}, None, problems)
    if read(v) != "root:x:0:0:root:/root:/bin/sh\n":
        problems.append("report overwrote the file timeline.html's symlink names")
    return problems


@case("destroy/baseline-out-dev-null")
def _():
    out = path("out", "for-baseline")
    problems = expect(quick_run(out), 0)
    p = os.path.join(FAKEDEV, "null")
    before = node(p)
    r = run(["baseline", out, "-o", "/dev/null"], fakedev=FAKEDEV)
    expect(r, 0, None, problems)
    unchanged(p, before, problems)
    return problems


@case("destroy/out-with-a-users-dir-named-like-a-trial-dir")
def _():
    out = path("out", "users-dir")
    keep = write(os.path.join(out, "quick", "trial-0", "thesis.tex"), "years of work\n")
    r = quick_run(out)
    problems = expect(r, 3)
    if "not a trial dir of shmstress" not in r.out:
        problems.append("the console does not say why the trial could not run")
    if not os.path.exists(keep):
        problems.append("the run removed a dir it did not make: %s" % keep)
    return problems


# --- destroy: subject-check's scratch dir -----------------------------------------------


def in_private_mount(script, *args):
    """Runs `sh -c script $0 args...` in a private mount namespace, $0 being shmstress opened as an fd
    beforehand: a tmpfs the script mounts over /tmp (or /dev/shm) may hide the checkout itself.
    Returns (result, problems so far, the script's rc, the rest of its answer line) or the problems."""
    exe = os.open(SHMSTRESS, os.O_RDONLY | os.O_CLOEXEC)
    try:
        p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script,
                              "/proc/self/fd/%d" % exe] + list(args), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                             pass_fds=(exe,))
    finally:
        os.close(exe)
    r = finish(p)
    problems = expect(r, 0)
    m = re.search(r"rc=(\d+)\n(.*)", r.out)
    if not m:
        return r, problems + ["no answer: %r" % r.out], None, None
    return r, problems, m.group(1), m.group(2).split()


@case("destroy/subject-check-tmp-out-of-inodes")
def _():
    # A private /tmp with room for exactly the markers: mkdtemp must fail,
    # and nothing of /tmp may go.
    r, problems, rc, left = in_private_mount(
        'mount -t tmpfs -o nr_inodes=4,size=1m none /tmp && touch /tmp/a /tmp/b /tmp/c; '
        '"$0" subject-check "$1" >/dev/null; rc=$?; '
        'echo "rc=$rc"; ls /tmp | tr "\\n" " "; echo; exit 0', "/bin/true")
    if rc is None:
        return problems
    if rc != "3":
        problems.append("subject-check exited %s, expected 3 (its scratch dir cannot be made)" % rc)
    if set(left) != {"a", "b", "c"}:
        problems.append("/tmp holds %s afterwards, it held a b c" % sorted(left))
    if "scratch directory" not in r.err:
        problems.append("no clear message: %r" % r.err[-300:])
    return problems


@case("destroy/a-worker-started-by-hand-refuses-and-touches-no-shm")
def _():
    # `shmstress worker` (or a variant's worker binary) run outside a trial, e.g. with --version:
    # it must not acquire in the machine's /dev/shm. A private /dev/shm shows what it made.
    r, problems, rc, made = in_private_mount(
        'mount -t tmpfs -o size=1m none /dev/shm && '
        'env -i PATH=/usr/bin:/bin "$0" worker --version >/dev/null; rc=$?; '
        'echo "rc=$rc"; ls -A /dev/shm | tr "\\n" " "; echo; exit 0')
    if rc is None:
        return problems
    if rc != "2":
        problems.append("a worker outside a trial exited %s, expected 2" % rc)
    if made:
        problems.append("a worker outside a trial made %s in /dev/shm" % made)
    if "no trial to run in" not in r.err:
        problems.append("no clear message: %r" % r.err[-300:])
    return problems


# --- destroy: clean against a live run in another pid namespace -------------------------


def free_pid():
    """A pid nothing in our pid namespace has (and, likely, will have soon)."""
    used = {int(d) for d in os.listdir("/proc") if d.isdigit()}
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    for p in range(min(pid_max - 1, 30000), 1000, -7):
        if p not in used and p - 1 not in used and p + 1 not in used:
            return p
    raise RuntimeError("no free pid")


@case("destroy/clean-spares-a-live-run-in-another-pid-namespace")
def _():
    # A --no-mount-ns run in a pid namespace of its own, its harness's pid one
    # that is dead in ours: kill(pid, 0) says "dead", the run is alive.
    pid = free_pid()
    out = path("out", "pidns-run")
    # unshare forks: its child is pid 1 (sh), which forks nothing before exec.
    script = 'echo %d > /proc/sys/kernel/ns_last_pid; "$0" "$@"' % (pid - 1)
    runner = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--", "/bin/sh", "-c", script, SHMSTRESS, "run",
         "scenarios/many-rounds.toml", "--no-mount-ns", "--duration", "6s", "--seed", "3", "--out", out],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    t0 = time.monotonic()
    names = []
    while time.monotonic() - t0 < 10 and runner.poll() is None:
        names = [n for n in os.listdir("/dev/shm")
                 if n.startswith("shmstress.%d." % pid) or n.startswith("shmstress.%d-" % pid)]
        if len([n for n in names if not n.endswith(".lease")]) >= 2:
            break
        time.sleep(0.05)
    problems = []
    if not names:
        problems.append("the run's segments never appeared in /dev/shm (pid %d)" % pid)
    cleaned = run(["clean"])
    expect(cleaned, 0, None, problems)
    mine = [l for l in cleaned.out.splitlines()
            if l.startswith("removed") and ("shmstress.%d." % pid in l or "shmstress.%d-" % pid in l)]
    if mine:
        problems.append("clean removed %d names of the live run: %s" % (len(mine), mine[:3]))
    r = finish(runner, 40, t0)
    expect(r, 0, None, problems)
    if mine or r.rc != 0:
        problems.append("the run: %s" % r)
    run(["clean"])  # what the case itself may have left
    return problems


# --- destroy: two runs on one --out; scenario dirs among the run's own files --------------


@case("destroy/second-run-on-a-live-out-is-refused")
def _():
    out = path("out", "shared-out")
    first = start(["run", "scenarios/many-rounds.toml", "--duration", "4s", "--seed", "5", "--out", out])
    t0 = time.monotonic()
    problems = []
    # The first run is live once it has started a trial (its dir appears).
    while time.monotonic() - t0 < 10 and not os.path.isdir(os.path.join(out, "many-rounds")):
        time.sleep(0.02)
    second = quick_run(out, timeout=20)
    expect(second, 2, "in use by a live run", problems)
    r = finish(first, 40, t0)
    expect(r, 0, None, problems)
    if os.path.isdir(os.path.join(out, "quick")):
        problems.append("the second run wrote into the first run's --out")
    return problems


def named_scenario(name):
    return write(path("scenarios", "named-" + name.replace(".", "_") + ".toml"),
                 'name = "%s"\n' % name + read(QUICK))


for reserved in ["summary.json", "report.html", ".shmstress.lock"]:
    def reserved_case(reserved=reserved):
        @case("destroy/scenario-named-" + reserved)
        def _():
            f = named_scenario(reserved)
            r = run(["run", f, "--seed", "7", "--out", path("out", "named-" + reserved)])
            return expect(r, 2, re.escape(f) + r":1: 'name' = ")
    reserved_case()


@case("destroy/report-of-a-scenario-named-replays")
def _():
    out = path("out", "named-replays")
    f = named_scenario("replays")
    problems = expect(run(["run", f, "--seed", "7", "--keep-passing", "--out", out]), 0)
    r = run(["report", out])
    expect(r, 0, None, problems)
    if "1 trials" not in r.out:
        problems.append("report did not find the trial of scenario 'replays': %r" % r.out[-300:])
    return problems


# --- destroy: an exec: subject's working directory -------------------------------------


@case("destroy/exec-subject-writes-land-in-its-rank-dir")
def _():
    subject = write(path("subjects", "cwd-writer"), """#!/bin/sh
echo "$PWD" > relative-write.txt
exec %s "$@"
""" % SHMSTRESS, 0o755)
    where = path("cwd-of-the-user", "x")
    os.makedirs(os.path.dirname(where), exist_ok=True)
    cwd = os.path.dirname(where)
    out = path("out", "cwd")
    # QUICK, not basic.toml: basic expects states that one trial under load
    # may not reach (exit 4, seen under ctest -j2), which is not this case's point.
    r = run(["run", QUICK, "--seed", "7", "--keep-passing", "--subject", "exec:" + subject, "--out", out],
            cwd=cwd)
    problems = expect(r, 0)
    if os.path.exists(os.path.join(cwd, "relative-write.txt")):
        problems.append("the subject's relative write landed in the dir shmstress was started in")
    rank_file = os.path.join(out, "quick", "trial-0", "job0-rank0", "relative-write.txt")
    # As root the trial ran in the run's own tmpfs (<out>/.trials) and was
    # moved to the out dir when kept: the rank dir is the same dir, either way.
    ran_in = [os.path.dirname(rank_file), os.path.join(out, ".trials", "quick", "trial-0", "job0-rank0")]
    if not os.path.exists(rank_file):
        problems.append("no relative-write.txt in the worker's own dir job0-rank0/")
    elif read(rank_file).strip() not in ran_in:
        problems.append("the worker started in %s" % read(rank_file).strip())
    return problems


@case("destroy/exec-subject-relative-command-still-runs")
def _():
    # exec:./x from the dir it is in: the command is resolved where shmstress
    # was started, before the worker moves to its own dir.
    d = path("relcmd", "x")
    os.makedirs(os.path.dirname(d), exist_ok=True)
    write(os.path.join(os.path.dirname(d), "subject.sh"), "#!/bin/sh\nexec %s \"$@\"\n" % SHMSTRESS, 0o755)
    r = run(["run", QUICK, "--seed", "7", "--subject", "exec:./subject.sh", "--out", path("out", "relcmd")],
            cwd=os.path.dirname(d))
    return expect(r, 0)


# --- destroy: a segment escaped into the shared /dev/shm ---------------------------------


@case("destroy/shared-shm-segment-outside-the-root-is-reported")
def _():
    name = "shmstress-hostile2-escaped-%d" % os.getpid()
    subject = write(path("subjects", "escaper"), """#!/bin/sh
# A daemon of the subject's leaves a segment outside SHMSTRESS_ROOT.
[ "$SHMSTRESS_RANK" = 0 ] && [ "$SHMSTRESS_JOB" = 0 ] && : > /dev/shm/%s
exec %s "$@"
""" % (name, SHMSTRESS), 0o755)
    out = path("out", "escaped")
    try:
        r = run(["run", os.path.join(SOURCE, "scenarios/basic.toml"), "--trials", "1", "--seed", "7",
                 "--no-mount-ns", "--allow-shared-shm", "--subject", "exec:" + subject, "--out", out])
        problems = expect(r, 4)
        summary = read(os.path.join(out, "summary.json")) if os.path.exists(os.path.join(out, "summary.json")) else ""
        if name not in summary:
            problems.append("summary.json does not name the escaped segment")
        if name not in r.out:
            problems.append("the console does not name the escaped segment")
        if not os.path.exists("/dev/shm/" + name):
            problems.append("the harness removed a segment it cannot prove is its own")
    finally:
        if os.path.exists("/dev/shm/" + name):
            os.unlink("/dev/shm/" + name)
    return problems


# --- green: it goes green on nothing -----------------------------------------------------

JOB2 = """
trials = 1
timeout = "10s"
[[job]]
ranks = 2
dirs = ["/data/{job}"]
remote = true
[job.workload]
acquire = true
rounds = 3
release = true
"""


def scenario_file(name, text):
    return write(path("scenarios", "green-" + name + ".toml"), text)


@case("green/exec-bin-true-is-not-valid")
def _():
    out = path("out", "bin-true")
    r = run(["run", QUICK, "--seed", "7", "--subject", "exec:/bin/true", "--out", out])
    problems = expect(r, 4)
    if "did not run its workload" not in r.out:
        problems.append("the console does not say the workers ran nothing")
    return problems


def refused_at_load(name, text, line, message, timeout=10):
    @case("green/" + name)
    def _():
        f = scenario_file(name, text)
        r = run(["run", f, "--seed", "7", "--out", path("out", "green-" + name)], timeout=timeout)
        return expect(r, 2, re.escape(f) + ":%d: .*%s" % (line, message))


FAULT_AT = JOB2.count("\n") + 1  # the line of the first [[fault]] header appended to JOB2
for after, what in [("ok:acquier", "no operation"), ("okay:acquire", "no event a worker logs"),
                    ("point:crash/no/such/point", "not a shmcoord failpoint")]:
    refused_at_load("signal-on-event-after-" + after.replace(":", "-").replace("/", "-"),
                    JOB2 + '[[fault]]\nkind = "signal-on-event"\nafter = "%s"\n' % after, FAULT_AT + 2, what)
refused_at_load("two-init-lock-faults-hang",
                JOB2 + '[[fault]]\nkind = "init-lock"\n[[fault]]\nkind = "init-lock"\n', FAULT_AT + 2,
                "seeds the segment init.lock, which the fault at line %d seeds too" % FAULT_AT)
refused_at_load("stale-lock-one-prefix-twice-stopped",
                JOB2 + '[[fault]]\nkind = "stale-lock"\nprefixes = [3, 3]\nholder = "stopped"\n', FAULT_AT,
                "seeds the lock file 000003_barrier_filelock, which it seeds twice")
refused_at_load("pause-and-replacement-on-one-rank",
                JOB2 + '[[fault]]\nkind = "pause-at-point"\npoint = "crash/barrier/wait/before-sleep"\n'
                'job = 0\nrank = 1\n[[fault]]\nkind = "replacement"\njob = 0\nrank = 1\n',
                FAULT_AT + 5, "one stop-at-point fault per rank")
refused_at_load("two-pause-at-point-on-one-rank",
                JOB2 + '[[fault]]\nkind = "pause-at-point"\npoint = "crash/barrier/wait/before-sleep"\n'
                'job = 0\nrank = 0\n[[fault]]\nkind = "pause-at-point"\npoint = "crash/barrier/wait/before-sleep"\n'
                'job = 0\nrank = 0\n', FAULT_AT + 5, "one stop-at-point fault per rank")
refused_at_load("two-random-pauses-that-can-meet",
                JOB2 + '[[fault]]\nkind = "pause-at-point"\npoint = "crash/barrier/wait/before-sleep"\n'
                '[[fault]]\nkind = "pause-at-point"\npoint = "crash/barrier/wait/before-sleep"\n',
                FAULT_AT + 3, "one stop-at-point fault per rank")
refused_at_load("two-containers-for-one-job",
                JOB2 + '[[fault]]\nkind = "containers"\njobs = [0]\n[[fault]]\nkind = "containers"\njobs = [0]\n',
                FAULT_AT + 3, "job 0")
refused_at_load("sigkill-at-overflows-int64-ns",
                JOB2 + '[[fault]]\nkind = "sigkill"\nat = "999999999m"\n', FAULT_AT + 2, "out of range")
refused_at_load("pause-hold-overflows-int64-ns",
                JOB2 + '[[fault]]\nkind = "pause-at-point"\npoint = "crash/barrier/wait/before-sleep"\n'
                'hold = "999999999m"\n', FAULT_AT + 3, "out of range")


@case("green/pause-at-point-that-never-fires-is-inconclusive")
def _():
    # A subject with no failpoints: shmcoord's worker with its pause knob taken away.
    subject = write(path("subjects", "no-failpoints"), "#!/bin/sh\nexec env -u SHMCOORD_PAUSE_AT %s \"$@\"\n" % SHMSTRESS,
                    0o755)
    f = scenario_file("pause-never", JOB2 + '[[fault]]\nkind = "pause-at-point"\n'
                      'point = "crash/barrier/wait/before-sleep"\njob = 0\nrank = 0\n')
    r = run(["run", f, "--seed", "7", "--subject", "exec:" + subject, "--out", path("out", "pause-never")])
    problems = expect(r, 4)
    if "fault:pause-at-point" not in r.out:
        problems.append("the console does not say the fault never fired")
    return problems


@case("green/read-only-dev-shm-without-mount-ns-is-exit-3")
def _():
    script = ('mount --bind /dev/shm /dev/shm && mount -o remount,bind,ro /dev/shm && '
              'exec "$0" run "$2" --seed 7 --no-mount-ns --out "$1"')
    p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script,
                          SHMSTRESS, path("out", "ro-shm"), QUICK], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    r = finish(p)
    return expect(r, 3, "Read-only file system")


# --- signal: every way a CI runner or a terminal ends a run ------------------------------


def reports_of(out, junit, metrics, problems):
    for f in [os.path.join(out, "summary.json"), os.path.join(out, "report.html"), junit, metrics]:
        if not os.path.isfile(f):
            problems.append("no %s" % os.path.basename(f))
    try:
        return json.loads(read(os.path.join(out, "summary.json")))
    except (OSError, ValueError):
        return {}


def signal_case(sig):
    @case("signal/%s-mid-run-is-interrupted-with-every-report" % signal.Signals(sig).name)
    def _():
        out = path("out", "sig-%d" % sig)
        junit, metrics = path("out", "sig-%d.xml" % sig), path("out", "sig-%d.prom" % sig)
        p = start(["run", "scenarios/many-rounds.toml", "--duration", "30s", "--seed", "5", "--out", out,
                   "--junit", junit, "--metrics-file", metrics], stdout=subprocess.DEVNULL)
        t0 = time.monotonic()
        # Interrupt it once a trial has finished (the soak's live summary.json says so).
        while time.monotonic() - t0 < 15 and p.poll() is None:
            try:
                if json.loads(read(os.path.join(out, "summary.json"))).get("trials", 0) >= 1:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        os.kill(p.pid, sig)
        r = finish(p, 20, t0)
        problems = expect(r, 4)
        summary = reports_of(out, junit, metrics, problems)
        if summary.get("interrupted") is not True:
            problems.append("summary.json does not say interrupted")
        return problems


for sig in [signal.SIGHUP, signal.SIGTERM, signal.SIGINT]:
    signal_case(sig)


@case("signal/sigpipe-on-stderr-mid-run-is-interrupted-with-every-report")
def _():
    # `run ... 2>&1 | head -1`: the reader goes away after the first line.
    out = path("out", "pipe-stderr")
    junit, metrics = path("out", "pipe-stderr.xml"), path("out", "pipe-stderr.prom")
    p = start(["run", "scenarios/many-rounds.toml", "--duration", "30s", "--seed", "5", "--out", out,
               "--junit", junit, "--metrics-file", metrics], stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    p.stdout.readline()
    p.stdout.close()  # the next progress line (5 s on) meets a closed pipe
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    r = Result(p.returncode, "", "", time.monotonic() - t0, session_gone(p.pid))
    problems = expect(r, 4)
    summary = reports_of(out, junit, metrics, problems)
    if summary.get("interrupted") is not True:
        problems.append("summary.json does not say interrupted")
    return problems


@case("signal/sigpipe-on-stdout-after-the-run-still-writes-every-report")
def _():
    # `run ... | head -1`: the console summary meets a closed pipe after the last trial.
    out = path("out", "pipe-stdout")
    junit, metrics = path("out", "pipe-stdout.xml"), path("out", "pipe-stdout.prom")
    p = start(["run", "scenarios/basic.toml", "--trials", "2", "--seed", "5", "--out", out, "--junit", junit,
               "--metrics-file", metrics], stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    p.stdout.close()  # nobody reads stdout at all
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    r = Result(p.returncode, "", "", time.monotonic() - t0, session_gone(p.pid))
    problems = expect(r, 0)
    reports_of(out, junit, metrics, problems)
    return problems


@case("signal/out-out-of-space-still-writes-junit-and-metrics-given-elsewhere")
def _():
    disk = path("full-disk", "x")
    os.makedirs(os.path.dirname(disk), exist_ok=True)
    disk = os.path.dirname(disk)
    junit, metrics = path("out", "full.xml"), path("out", "full.prom")
    # 3 inodes: the mount's root, the run dir and its lock file: the run's scratch mount point
    # (.trials: then its trials run in the out dir), the scenario's dir, the trial's own dir and
    # every report in --out meet ENOSPC.
    script = 'mount -t tmpfs -o nr_inodes=3,size=1m none "$1" && exec "$0" run "$2" --seed 7 --out "$1/run" --junit "$3" --metrics-file "$4"'
    p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script,
                          SHMSTRESS, disk, QUICK, junit, metrics], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    r = finish(p)
    problems = expect(r, 3, "cannot write summary.json")
    for f in [junit, metrics]:
        if not os.path.isfile(f):
            problems.append("%s given outside --out was not written" % os.path.basename(f))
    return problems


# --- believe: what a subject says is checked, not believed ------------------------------


def forging_subject(name, python_body):
    """A subject that writes what python_body says on the events fd, then runs
    the native worker (so the trial is otherwise a real one)."""
    return write(path("subjects", name), """#!/usr/bin/python3
import json, os, sys, time
fd = int(os.environ.get("SHMSTRESS_EVENTS_FD", "3"))
job, rank = int(os.environ["SHMSTRESS_JOB"]), int(os.environ["SHMSTRESS_RANK"])
def emit(**e):
    os.write(fd, (json.dumps(e) + "\\n").encode())
if job == 0 and rank == 0 and os.environ.get("SHMSTRESS_ROLE") == "rank":
%s
os.execv(%r, [%r] + sys.argv[1:])
""" % ("\n".join("    " + l for l in python_body.strip().splitlines()), SHMSTRESS, SHMSTRESS), 0o755)


@case("believe/an-acquire-forged-as-another-jobs-is-not-judged")
def _():
    subject = forging_subject("forger", """
t = time.monotonic_ns()
emit(t=t, type="invoke", op="acquire", id=999, job=1, rank=0, local_rank=0, pid=os.getpid(), args={})
emit(t=t + 1000, type="ok", op="acquire", id=999, job=1, rank=0, local_rank=0, pid=os.getpid(), value={"prefix": 0})
""")
    out = path("out", "forged")
    r = run(["run", "scenarios/basic.toml", "--trials", "1", "--seed", "7", "--subject", "exec:" + subject,
             "--keep-passing", "--out", out])
    problems = expect(r, 4)
    if "claims job 1 rank 0 from pid" not in r.out:
        problems.append("no history error names the forged claim: %r" % r.out[-400:])
    return problems


@case("believe/an-ok-2^62-ns-after-its-invoke-is-a-history-error")
def _():
    subject = forging_subject("time-traveller", """
t = time.monotonic_ns()
emit(t=t, type="invoke", op="clean", id=999, job=0, rank=0, local_rank=0, pid=os.getpid(), args={})
emit(t=t + 2**62, type="ok", op="clean", id=999, job=0, rank=0, local_rank=0, pid=os.getpid(), value={})
""")
    out = path("out", "time-travel")
    r = run(["run", QUICK, "--seed", "7", "--subject", "exec:" + subject, "--out", out])
    problems = expect(r, 4)
    if "outside the trial" not in r.out:
        problems.append("no history error says the time is outside the trial: %r" % r.out[-400:])
    try:
        s = json.loads(read(os.path.join(out, "summary.json")))
        for q in (s.get("latency_ms") or {}).values():
            if isinstance(q, dict) and (q.get("max") or 0) > 60000:
                problems.append("a latency of %s ms reached summary.json" % q.get("max"))
    except (OSError, ValueError) as e:
        problems.append("no summary.json: %s" % e)
    return problems


ESC = "\x1b"


@case("believe/an-escape-sequence-in-an-excuse-is-shown-not-obeyed")
def _():
    f = write(path("scenarios", "escape-excuse.toml"), read(QUICK) +
              '[excuse]\n"worker.exits" = "fine \\u001b[2J\\u001b]0;pwned\\u0007 really"\n')
    # -v: the console shows an excuse that hid nothing only in verbose mode.
    r = run(["run", f, "--seed", "7", "-v", "--out", path("out", "escape-excuse")])
    problems = expect(r, 0)
    if ESC in r.out or ESC in r.err:
        problems.append("a raw ESC reached the console")
    if "\\x1b[2J" not in r.out:
        problems.append("the excuse is not shown escaped: %r" % r.out[-300:])
    return problems


@case("believe/an-escape-sequence-in-a-name-a-subject-left-is-shown-not-obeyed")
def _():
    subject = write(path("subjects", "esc-leaver"), """#!/bin/sh
[ "$SHMSTRESS_ROLE" = rank ] && : > "$SHMSTRESS_LOCK_DIR/left$(printf '\\033[2J')behind"
exec %s "$@"
""" % SHMSTRESS, 0o755)
    r = run(["run", QUICK, "--seed", "7", "--subject", "exec:" + subject, "--out", path("out", "escape-name")])
    problems = expect(r, 1)
    if ESC in r.out or ESC in r.err:
        problems.append("a raw ESC reached the console")
    if "left\\x1b[2Jbehind" not in r.out:
        problems.append("the leftover is not named, escaped: %r" % r.out[-300:])
    return problems


# --- also: replay/shrink of a stored command; worker logs; merge; baseline --------------


MARK = os.path.join(TMP, "stored-command-ran")


def marking_subject():
    """A subject that leaves MARK behind when it runs, then runs the native worker."""
    return write(path("subjects", "marker"), """#!/bin/sh
: > %s
exec %s "$@"
""" % (MARK, SHMSTRESS), 0o755)


def kept_trial(name, *extra):
    """The trial dir of a passing one-trial run of QUICK, kept."""
    out = path("out", name)
    r = quick_run(out, "--keep-passing", *extra)
    if r.rc != 0:
        raise RuntimeError("the setup run failed: %s" % r)
    return os.path.join(out, "quick", "trial-0")


def refused_stored_command(trial, command, argv_tail=()):
    """replay and shrink of `trial` refuse (exit 2) to run `command`, name it,
    and nothing ran it."""
    problems = []
    for verb, extra in [("replay", ["--times", "1"]), ("shrink", ["--invariant", "prefix.unique"])]:
        if os.path.exists(MARK):
            os.unlink(MARK)
        r = run([verb, trial] + extra + list(argv_tail), timeout=30)
        got = expect(r, 2, re.escape(command) + ".*--allow-stored-command")
        problems += ["%s: %s" % (verb, p) for p in got]
        if os.path.exists(MARK):
            problems.append("%s ran the stored command %s" % (verb, command))
    return problems


@case("also/replay-and-shrink-refuse-the-exec-subject-a-trial-dir-names")
def _():
    subject = marking_subject()
    trial = kept_trial("stored-exec", "--subject", "exec:" + subject)
    return refused_stored_command(trial, "exec:" + subject)


@case("also/replay-and-shrink-refuse-a-subject-written-into-schedule-json")
def _():
    subject = marking_subject()
    trial = kept_trial("stored-tampered-schedule")
    f = os.path.join(trial, "schedule.json")
    j = json.loads(read(f))
    j["subject"] = "exec:" + subject
    write(f, json.dumps(j))
    return refused_stored_command(trial, "exec:" + subject)


@case("also/replay-and-shrink-refuse-a-subject-written-into-the-scenario-copy")
def _():
    subject = marking_subject()
    trial = kept_trial("stored-tampered-scenario")
    f = os.path.join(trial, "schedule.json")
    j = json.loads(read(f))
    del j["subject"]
    write(f, json.dumps(j))
    sc = os.path.join(trial, "scenario.toml")
    write(sc, 'subject = "exec:%s"\n' % subject + read(sc))
    return refused_stored_command(trial, "exec:" + subject)


@case("also/replay-and-shrink-refuse-a-subject-defined-beside-the-trial-dir")
def _():
    # A bug report's tarball: a trial dir and, above it, subjects/<name> that
    # the user's own ./subjects (the source tree here) does not have.
    subject = marking_subject()
    trial = kept_trial("stored-named")
    write(os.path.join(TMP, "out", "subjects", "from-the-report", "subject.toml"),
          'description = "x"\ncommand = "%s"\n' % subject)
    f = os.path.join(trial, "schedule.json")
    j = json.loads(read(f))
    j["subject"] = "from-the-report"
    write(f, json.dumps(j))
    return refused_stored_command(trial, "from-the-report")


@case("also/replay-runs-the-stored-command-the-user-names-or-allows")
def _():
    subject = marking_subject()
    trial = kept_trial("stored-allowed", "--subject", "exec:" + subject)
    problems = []
    for how in (["--subject", "exec:" + subject], ["--allow-stored-command"]):
        if os.path.exists(MARK):
            os.unlink(MARK)
        r = run(["replay", trial, "--times", "1"] + how, timeout=30)
        expect(r, 1, None, problems)  # 1: the passing trial is not reproduced
        if not os.path.exists(MARK):
            problems.append("replay %s did not run the subject" % " ".join(how))
        if "subject: exec:" + subject not in r.out:
            problems.append("replay %s does not show the command it runs: %r" % (" ".join(how), r.out[-300:]))
    return problems


@case("also/a-worker-that-prints-without-end-has-its-logs-cut")
def _():
    subject = write(path("subjects", "chatty"), """#!/bin/sh
head -c 3000000 /dev/zero | tr '\\0' o
head -c 3000000 /dev/zero | tr '\\0' e >&2
exec %s "$@"
""" % SHMSTRESS, 0o755)
    trial = kept_trial("chatty", "--subject", "exec:" + subject)
    problems = []
    for log in ("stdout.log", "stderr.log"):
        f = os.path.join(trial, "job0-rank0", log)
        size = os.path.getsize(f)
        if size > (1 << 20) + 200:
            problems.append("%s holds %d bytes (cap 1 MiB)" % (log, size))
        with open(f, "rb") as fh:
            fh.seek(max(0, size - 200))
            tail = fh.read().decode(errors="replace")
        if "[shmstress: log cut at" not in tail:
            problems.append("%s has no truncation mark at its end: %r" % (log, tail[-120:]))
    return problems


@case("also/a-worker-that-swaps-its-log-for-a-symlink-gets-its-own-file-cut-not-the-target")
def _():
    victim = write(path("not-the-harness", "victim.log"), "v" * 3000000)
    before = (node(victim), read(victim))
    subject = write(path("subjects", "log-swapper"), """#!/bin/sh
if [ "$SHMSTRESS_ROLE" = rank ]; then
  head -c 3000000 /dev/zero | tr '\\0' o
  mv stdout.log moved.log && ln -s %s stdout.log
fi
exec %s "$@"
""" % (victim, SHMSTRESS), 0o755)
    trial = kept_trial("log-swapper", "--subject", "exec:" + subject)
    problems = []
    if (node(victim), read(victim)) != before:
        problems.append("the file stdout.log was swapped for a symlink to was changed")
    moved = os.path.join(trial, "job0-rank0", "moved.log")
    if not os.path.isfile(moved) or os.path.getsize(moved) > (1 << 20) + 200:
        problems.append("the harness's own log (renamed moved.log) was not cut: %s" % node(moved)[0])
    return problems


def two_shards(name):
    """Two passing shards of one nightly (2 trials of QUICK, --shard 0/2 and 1/2)."""
    dirs = []
    for i in range(2):
        out = path("out", name, "shard%d" % i)
        r = quick_run(out, "--trials", "2", "--shard", "%d/2" % i)
        if r.rc != 0:
            raise RuntimeError("the setup run of shard %d failed: %s" % (i, r))
        dirs.append(out)
    return dirs


@case("also/merge-out-at-one-of-its-shards-is-refused")
def _():
    s0, s1 = two_shards("merge-into-shard")
    problems = []
    for out in (s0, s0 + "/.", s1):
        f = os.path.join(out, "summary.json")
        before, text = node(f), read(f)
        r = run(["merge", s0, s1, "--out", out])
        expect(r, 2, "is the run dir of shard", problems)
        unchanged(f, before, problems)
        if read(f) != text:
            problems.append("merge --out %s changed that shard's summary.json" % out)
        if os.path.exists(os.path.join(out, "report.html")) and "merged" in read(os.path.join(out, "report.html")):
            problems.append("merge --out %s wrote a merged report.html into the shard" % out)
    return problems


def absurd_shard_case(name, edit, field):
    @case("also/merge-refuses-" + name)
    def _():
        s0, s1 = two_shards("merge-" + name)
        f = os.path.join(s1, "summary.json")
        j = json.loads(read(f))
        edit(j)
        write(f, json.dumps(j))
        r = run(["merge", s0, s1, "--out", path("out", "merged-" + name)], timeout=20)
        return expect(r, 2, re.escape(f) + ": " + re.escape(field))


def _set(j, keys, value):
    for k in keys[:-1]:
        j = j[k]
    j[keys[-1]] = value


absurd_shard_case("a-shard-count-of-2000000000", lambda j: _set(j, ["shard"], "1/2000000000"), "/shard")
absurd_shard_case("totals-of-2^64-1", lambda j: _set(j, ["tally", "totals", "trials"], 2**64 - 1),
                  "/tally/totals/trials")
absurd_shard_case("a-scenario-count-of-2^64-1",
                  lambda j: _set(j, ["tally", "scenarios", "quick", "trials"], 2**64 - 1),
                  "/tally/scenarios/quick/trials")
absurd_shard_case("a-trial-index-past-2^32", lambda j: j["violations"].append({
    "scenario": "quick", "trial": 2**32 + 1, "seed": 1, "run_seed": 7, "trial_dir": "", "reproduce": "",
    "invariant": "prefix.unique", "problems": ["forged"]}), "/violations/0/trial")


@case("also/baseline-refuses-a-blank-reason-at-write")
def _():
    # A run with a bucket: a subject that leaves a lock file behind (cleanup.no-leak).
    subject = write(path("subjects", "leaver"), """#!/bin/sh
[ "$SHMSTRESS_ROLE" = rank ] && : > "$SHMSTRESS_LOCK_DIR/left-behind"
exec %s "$@"
""" % SHMSTRESS, 0o755)
    out = path("out", "baseline-blank")
    r = quick_run(out, "--subject", "exec:" + subject)
    problems = expect(r, 1)
    s = json.loads(read(os.path.join(out, "summary.json")))
    if not s.get("buckets"):
        return problems + ["the setup run has no bucket to baseline"]
    for reason in [" ", "\t", " \n "]:
        f = path("baselines", "blank.txt")
        if os.path.exists(f):
            os.unlink(f)
        r = run(["baseline", out, "--reason", reason, "-o", f])
        expect(r, 2, "--reason", problems)
        if os.path.exists(f):
            problems.append("baseline --reason %r wrote %s" % (reason, f))
    # A summary.json whose known bucket carries a blank reason: refused, not written.
    s["buckets"][0]["known_reason"] = " "
    s["buckets"][0]["status"] = "known"
    edited = write(path("baselines", "edited", "summary.json"), json.dumps(s))
    f = path("baselines", "from-edited.txt")
    r = run(["baseline", edited, "-o", f])
    expect(r, 2, re.escape(edited) + r":\d+: /buckets/0/known_reason: must be a non-blank string", problems)
    if os.path.exists(f):
        problems.append("baseline of a blank known_reason wrote %s" % f)
    # What it does write, `run --baseline` takes.
    f = path("baselines", "ok.txt")
    expect(run(["baseline", out, "--reason", "leaves a lock file", "-o", f]), 0, None, problems)
    r = quick_run(path("out", "baseline-used"), "--subject", "exec:" + subject, "--baseline", f)
    expect(r, 0, None, problems)
    return problems


# --- running it ------------------------------------------------------------------------


def main():
    selected = [(n, f) for n, f in CASES if not ONLY or ONLY in n]
    if LIST:
        for n, _ in selected:
            print(n)
        return 0
    make_fakedev()
    shm_before = set(os.listdir("/dev/shm"))
    failed = 0
    slowest = (0.0, "")
    for name, fn in selected:
        t0 = time.monotonic()
        try:
            problems = fn()
        except Exception as e:  # a broken case is a failure, not a crash of the corpus
            problems = ["the case raised %s: %s" % (type(e).__name__, e)]
        elapsed = time.monotonic() - t0
        slowest = max(slowest, (elapsed, name))
        if problems:
            failed += 1
            print("FAIL %s (%.1f s): %s" % (name, elapsed, "; ".join(problems)[:1500]))
        else:
            print("ok   %s (%.1f s)" % (name, elapsed))
        sys.stdout.flush()
    shm_after = set(os.listdir("/dev/shm"))
    if shm_after != shm_before:
        failed += 1
        print("FAIL /dev/shm changed: new %s, gone %s" % (sorted(shm_after - shm_before),
                                                         sorted(shm_before - shm_after)))
    print("hostile inputs II: %d cases, %d failed (slowest %.1f s: %s)" % (
        len(selected), failed, slowest[0], slowest[1]))
    return 1 if failed else 0


if __name__ == "__main__":
    os.chdir(SOURCE)
    try:
        sys.exit(main())
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
