// Fingerprints: the same flaw seen with other pids, times, names and counts is
// one fingerprint; different flaws are different ones. The problem lines here
// are real: what every checker wrote (harvested from the checkers' own tests
// on main and on the "oracle" rewording, and from catalog runs of the known-
// bad variants in tests/mutants), so the normalizer is tested on both wordings.
#include "triage.h"

#include <gtest/gtest.h>

#include <set>

namespace harness {
namespace {

bool HasDigit(const std::string& s) { return s.find_first_of("0123456789") != std::string::npos; }

// One line per checker and kind of problem, as the checkers wrote them.
const std::vector<std::string>& Corpus() {
  static const std::vector<std::string> lines = {
      // prefix.unique
      "prefix 0 held by job 0 (pids 1000) from +2.000ms to +10.000ms and by job 1 (pids 1100) from +4.000ms to "
      "+12.000ms at the same time (both acquires returned ok)",
      "prefix 0: every holder of job 0 (pids 1000) was killed holding it by +10.000ms and nothing cleaned it "
      "before the trial ended, yet job 1 (pids 1100) held it from +20.000ms: nothing shows the dead job's "
      "resources were gone",
      "prefix 0 was granted to job 1 rank 0 (pid 1100) at +21.000ms while segment /shm.000000_shard_states of "
      "job 0 (pids 1000), which was killed holding it by +10.000ms, was still there (the grant's present list "
      "shows it): the dead job still held the prefix",
      // prefix.agreement
      "job 0: ranks disagree on the prefix: rank 0 (pid 1000) got prefix 0 at +2.000ms, rank 1 (pid 1001) got "
      "prefix 1 at +3.000ms",
      "job 0: rank 1 (pid 1001) got prefix 0 at +2.000ms, but rank 2 (pid 1002) failed at +3.000ms: exists: "
      "shm_open(/000000_locals): File exists",
      // prefix.exclusive-local
      "local dir /data/shared (with a remote) granted to job 0 (pids 1000, prefix 0) from +2.000ms to +10.000ms "
      "and to job 1 (pids 1100, prefix 1) from +4.000ms to +10.000ms at the same time",
      "acquire of job 1 rank 0 (pid 1100) invoked +3.000ms was refused \"in use\" with a message that names none "
      "of the shared dirs (/data/shared): Reused local directory",
      // prefix.progress
      "acquire of job 0 rank 0 (pid 1000) invoked +1.000ms was still open when the trial timed out at "
      "+900.000ms: a hang",
      "acquire of job 0 rank 1 (pid 1001) invoked +1.000ms returned after 1599.000ms, past its deadline "
      "1000.000ms + grace 500.000ms",
      "job 0 rank 0 (pid 1000) reported holding 900 fds after acquire, more than the bound 16",
      // barrier.safety
      "job 0 round 0: rank 0 (pid 1000) left at +2.000ms before rank 1 entered (pid 1001 entered at +3.000ms)",
      "job 0 round 0: ranks were released by different rounds: rank 0 (pid 1000) as round 7, rank 1 (pid 1001) "
      "as round 8",
      // barrier.liveness (main, then the oracle's death-latency bound)
      "barrier of job 0 rank 0 (pid 1000) invoked +1.000ms was still waiting when the trial timed out at "
      "+5000.000ms: a hang",
      "barrier of job 1 rank 1 (pid 31195) invoked +26.515ms failed round 0 at +3027.851ms (timeout: barrier "
      "/shmstress.000000_barrier is broken: timed out after 3000 ms in round 0 waiting for 1 never attached) "
      "although every participant had entered it and all were alive and running",
      "barrier of job 0 rank 0 (pid 1000) invoked +3.000ms failed (broken) at +910.000ms, 900.000ms after rank "
      "1 (pid 1001) was killed (signal 9) at +10.000ms without entering round 0: past the death-detection bound "
      "700.000ms (liveness 200.000ms + slack 500.000ms)",
      // cleanup.no-leak
      "left in /dev/shm after the cleanup step: /shmstress.t3.000001_barrier",
      "left in the lock dir after the cleanup step: /run/locks/000001_barrier_filelock",
      // cleanup.safety (main and oracle)
      "cleanup by job 0 rank 1 (pid 30097) (+25.513ms to +25.891ms) removed /shmstress.000001_barrier while job "
      "0 rank 0 (pid 30092) (acquired +25.250ms, holding until +27.120ms) held prefix 1",
      "cleanup by job 0 rank 0 (pid 1000) (+6.000ms to +7.000ms) removed /shm.000009_locals, which belongs to "
      "another user",
      "cleanup by job 0 rank 0 (pid 1000) (+5.000ms to +6.000ms) removed /locks/shm.init.lock while it was held "
      "by a live process (stopped)",
      "segment /shm.000000_shard_states that job 0 rank 0 (pid 1000) created at +4.000ms while holding prefix 0 "
      "was gone when its creator, still holding the prefix, witnessed it at +9.000ms: removed under a live "
      "holder; no cleanup reported removing it (a sweep, a tracker, another job's exit?)",
      // worker.clean-exit
      "job 0 rank 1 (pid 1001) died of SIGSEGV at +3.000ms",
      "job 0 rank 0 (pid 1000) was killed by SIGKILL at +3.000ms, which neither the harness nor a crash point "
      "sent",
      "job 0 rank 0 (pid 1000) exited 70 (uncaught exception) at +3.000ms",
      "job 0 rank 0 (pid 1000) exited 0 at +3.000ms with release of job 0 rank 0 (pid 1000) invoked +2.000ms "
      "still open",
      // worker.exits (oracle)
      "job 0 rank 0 (pid 1000) did not exit after its last op (release of job 0 rank 0 (pid 1000) invoked "
      "+3.000ms, ended +4.000ms) and had to be killed at teardown (+5000.000ms)",
      "job 0 rank 0 (pid 1000) exited 996.000ms after its last op ended (release, at +4.000ms): more than the "
      "grace 500.000ms",
      // harness.no-orphans
      "pid 1000 (job 0 rank 0) was still alive after the trial's teardown",
      "job 0 rank 0 (pid 1000) was never reaped (no exit in the history)",
  };
  return lines;
}

TEST(ProblemShape, StripsEveryPidTimePathAndNumberOfEveryChecker) {
  std::set<std::string> shapes;
  for (const auto& line : Corpus()) {
    const std::string s = problem_shape(line);
    EXPECT_FALSE(HasDigit(s)) << line << "\n  -> " << s;
    EXPECT_EQ(s.find("/shm"), std::string::npos) << s;
    shapes.insert(s);
  }
  // Every line of the corpus is a different problem, and stays one.
  EXPECT_EQ(shapes.size(), Corpus().size());
}

TEST(ProblemShape, TheSameFlawWithOtherPidsTimesAndNamesIsOneShape) {
  EXPECT_EQ(problem_shape("cleanup by job 0 rank 1 (pid 30097) (+25.513ms to +25.891ms) removed "
                          "/shmstress.000001_barrier while job 0 rank 0 (pid 30092) (acquired +25.250ms, "
                          "holding until +27.120ms) held prefix 1"),
            problem_shape("cleanup by job 2 rank 0 (pid 7) (+1225.5ms to +1300ms) removed "
                          "/dev/shm/shmstress.4242.17.000003_shard_states while job 1 rank 3 (pid 100001) "
                          "(acquired +3.000ms, holding until +5000.000ms) held prefix 3"));
  EXPECT_EQ(problem_shape("cleanup by job 0 rank 1 (pid 5) (+1.0ms to +2.0ms) removed /x"),
            "cleanup by job <n> rank <n> (pid <n>) (<t> to <t>) removed <path>");
}

TEST(ProblemShape, ListsOfAnyLengthReadAlike) {
  // Leftovers: one or three names.
  EXPECT_EQ(problem_shape("left in /dev/shm after the cleanup step: /a_1"),
            problem_shape("left in /dev/shm after the cleanup step: /b_2, /c_3, /d_4"));
  // Pids of a job, ranks that disagree.
  EXPECT_EQ(problem_shape("prefix 0 held by job 0 (pids 1000,1001) from +2.000ms to +10.000ms"),
            problem_shape("prefix 4 held by job 2 (pids 7) from +1.5ms to +3ms"));
  EXPECT_EQ(problem_shape("job 0: ranks disagree on the prefix: rank 0 (pid 1) got prefix 0 at +2.000ms, rank "
                          "1 (pid 2) got prefix 1 at +3.000ms"),
            problem_shape("job 3: ranks disagree on the prefix: rank 0 (pid 1) got prefix 0 at +2.000ms, rank "
                          "1 (pid 2) got prefix 1 at +3.000ms, rank 2 (pid 3) got prefix 1 at +4.000ms"));
}

TEST(ProblemShape, DifferentFlawsUnderOneInvariantDiffer) {
  const std::string live =
      "cleanup by job 1 rank 0 (pid 1100) (+5.000ms to +6.000ms) removed /shm.000000_shard_states while job 0 "
      "rank 0 (pid 1000) (acquired +2.000ms, holding until +10.000ms) held prefix 0";
  const std::string stopped = live + ", stopped from +3.000ms to +9.000ms";
  const std::string foreign =
      "cleanup by job 0 rank 0 (pid 1000) (+6.000ms to +7.000ms) removed /shm.000009_locals, which belongs to "
      "another user";
  EXPECT_NE(problem_shape(live), problem_shape(stopped));
  EXPECT_NE(problem_shape(live), problem_shape(foreign));
  // The subject's own words are part of the shape: another error is another flaw.
  EXPECT_NE(problem_shape("job 0: rank 1 (pid 1) got prefix 0 at +2.000ms, but rank 2 (pid 2) failed at "
                          "+3.000ms: exists: shm_open(/000000_locals): File exists"),
            problem_shape("job 0: rank 1 (pid 1) got prefix 0 at +2.000ms, but rank 2 (pid 2) failed at "
                          "+3.000ms: in-use: /data/0 is in use by job 3"));
}

TEST(ProblemShape, Tokens) {
  EXPECT_EQ(problem_shape("removed /a/b_1."), "removed <path>.");           // sentence end is not the path
  EXPECT_EQ(problem_shape("path=/tmp/x:y"), "path=<path>");                 // after '=': a path
  EXPECT_EQ(problem_shape("a / b and a/b"), "a / b and a/b");               // not a path: no token starts there
  EXPECT_EQ(problem_shape("took 1.5s, 250 ms, 3us, +2.000ms"), "took <t>, <n> ms, <t>");
  EXPECT_EQ(problem_shape("object at 0x7f3a9c00 seed deadbeef01"), "object at <n> seed <n>");
  EXPECT_EQ(problem_shape("worker t3 rank2 of shmstress.t3"), "worker t# rank# of shmstress.t#");
  EXPECT_EQ(problem_shape("  spaced \t out\n"), "spaced out");
  EXPECT_EQ(problem_shape("errno 13 (EACCES): Permission denied"), "errno <n> (EACCES): Permission denied");
  EXPECT_EQ(problem_shape("[Errno 17] File exists: '/000001_locals'"), "[Errno <n>] File exists: '<path>'");
  EXPECT_EQ(problem_shape("used 95% of 64 MiB"), "used <n>% of <n> MiB");
  // Long lines are cut, never inside a UTF-8 sequence.
  const std::string shape = problem_shape(std::string(kMaxShapeLength - 1, 'a') + "\xC3\xA9 tail");
  EXPECT_LE(shape.size(), kMaxShapeLength);
  EXPECT_EQ(shape, std::string(kMaxShapeLength - 1, 'a'));
}

TEST(Fingerprint, InvariantScenarioAndShapeAllCount) {
  const auto a = make_fingerprint("cleanup.safety", "basic", "removed <path>");
  EXPECT_EQ(a.id.substr(0, a.id.rfind('/') + 1), "cleanup.safety/basic/");
  EXPECT_EQ(a.id, make_fingerprint("cleanup.safety", "basic", "removed <path>").id);  // stable
  EXPECT_NE(a.id, make_fingerprint("cleanup.safety", "kill-holder", "removed <path>").id);
  EXPECT_NE(a.id.substr(a.id.rfind('/')), make_fingerprint("cleanup.no-leak", "basic", "removed <path>").id.substr(a.id.rfind('/')));
  EXPECT_NE(a.id, make_fingerprint("cleanup.safety", "basic", "removed <path>, which belongs to another user").id);
  // Pinned: a fingerprint is FNV-1a, not std::hash, so the nights after (and
  // other machines) agree with baselines written today.
  EXPECT_EQ(a.id, "cleanup.safety/basic/" + a.id.substr(a.id.rfind('/') + 1));
  EXPECT_EQ(make_fingerprint("i", "s", "x").id, "i/s/8d248453367d");
}

TEST(Fingerprint, ParsesWhatItWrites) {
  auto p = parse_fingerprint("cleanup.safety/kill-holder/3f2a9c1b07de");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->invariant, "cleanup.safety");
  EXPECT_EQ(p->scenario, "kill-holder");
  EXPECT_EQ(p->hash, "3f2a9c1b07de");
  for (const char* bad : {"", "cleanup.safety", "cleanup.safety/basic", "cleanup.safety/basic/3F2A9C1B07DE",
                          "cleanup.safety/basic/3f2a9c1b07d", "cleanup.safety/ba sic/3f2a9c1b07de",
                          "/basic/3f2a9c1b07de", "cleanup.safety//3f2a9c1b07de", "a/b/c/3f2a9c1b07de"}) {
    EXPECT_FALSE(parse_fingerprint(bad)) << bad;
  }
}

TEST(Fingerprint, OnePerDistinctShapeOfAViolation) {
  CheckResult c;
  c.invariant = "cleanup.safety";
  c.verdict = Verdict::kInvalid;
  c.problems = {"cleanup by job 0 rank 1 (pid 5) (+1ms to +2ms) removed /a_1 while job 0 rank 0 (pid 4) held prefix 1",
                "cleanup by job 0 rank 1 (pid 5) (+1ms to +2ms) removed /a_2 while job 0 rank 0 (pid 4) held prefix 1",
                "cleanup by job 0 rank 1 (pid 5) (+1ms to +2ms) removed /x, which belongs to another user"};
  auto fps = violation_fingerprints("basic", c);
  ASSERT_EQ(fps.size(), 2u);
  EXPECT_NE(fps[0].id, fps[1].id);
  c.problems.clear();
  fps = violation_fingerprints("basic", c);
  ASSERT_EQ(fps.size(), 1u);
  EXPECT_EQ(fps[0].shape, "(no problem text)");
  for (int i = 0; i < 20; ++i) c.problems.push_back("problem kind " + std::string(1, static_cast<char>('a' + i)));
  EXPECT_EQ(violation_fingerprints("basic", c).size(), kMaxShapesPerViolation);
}

}  // namespace
}  // namespace harness
