// The console summary fits a screen: the verdict first, then only what is
// not valid, each violation with its reproduce command; the scenario x
// invariant matrix is never printed (summary.json and report.html hold it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "reports/reports.h"

namespace reports {
namespace {

using harness::CheckResult;
using harness::RunResult;
using harness::TrialResult;
using harness::Verdict;

const std::vector<std::string> kInvariants = {"prefix.unique",   "prefix.agreement", "prefix.progress", "barrier.safety",
                                              "barrier.liveness", "cleanup.safety",  "cleanup.no-leak", "ops.explained",
                                              "harness.no-orphans", "job.teardown",  "resource.private"};

TrialResult Trial(const std::string& scenario, int n, Verdict bad = Verdict::kValid, const std::string& bad_inv = "") {
  TrialResult t;
  t.scenario = scenario;
  t.trial = n;
  t.seed = 100 + n;
  for (const auto& inv : kInvariants) {
    CheckResult c;
    c.invariant = inv;
    if (inv == bad_inv) {
      c.verdict = bad;
      c.problems = {"job 1 rank 0 was granted prefix 0 while job 0 held it", "second problem", "third", "fourth"};
      t.verdict = harness::compose(t.verdict, bad);
    }
    t.checks.push_back(c);
  }
  t.faults = {{"sigkill", 1}};
  t.reached = {"fault:sigkill", "killed-holding"};
  t.dir = "/runs/x/" + scenario + "/trial-" + std::to_string(n);
  t.reproduce = "shmstress run scenarios/" + scenario + ".toml --seed 7 --trial " + std::to_string(n);
  return t;
}

// A soak of the default catalog's size: 42 scenarios x 11 invariants.
RunResult GreenSoak() {
  RunResult r;
  r.run_id = "green";
  r.elapsed = 60;
  for (int s = 0; s < 42; ++s) {
    const std::string name = "scenario-" + std::to_string(s);
    r.expect_reached[name] = {"fault:sigkill", "killed-holding"};
    for (int i = 0; i < 3; ++i) r.add(Trial(name, i));
  }
  return r;
}

std::string Console(const RunResult& r, bool verbose = false) {
  char* buf = nullptr;
  std::size_t len = 0;
  FILE* f = ::open_memstream(&buf, &len);
  console_summary(f, r, false, verbose);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

std::vector<std::string> NonEmptyLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

TEST(ConsoleSummary, AGreenSoakOfTheWholeCatalogIsTheVerdictAndAHint) {
  const std::string console = Console(GreenSoak());
  const auto lines = NonEmptyLines(console);
  ASSERT_EQ(lines.size(), 2u) << console;
  EXPECT_EQ(lines[0], "verdict valid: 126 trials of 42 scenarios in 60.0s");
  EXPECT_EQ(lines[1], "(one line per scenario: -v; every scenario x invariant: summary.json, report.html)");
  EXPECT_EQ(console.find("prefix.unique"), std::string::npos) << "the matrix is printed:\n" << console;
}

TEST(ConsoleSummary, VerboseAddsOneLinePerScenarioWithItsStatesAndFaults) {
  const auto lines = NonEmptyLines(Console(GreenSoak(), /*verbose=*/true));
  ASSERT_EQ(lines.size(), 1u + 1u + 42u);  // verdict, header, scenarios
  EXPECT_EQ(lines[0].rfind("verdict valid:", 0), 0u);
  EXPECT_EQ(lines[1].rfind("scenario ", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2],
            "scenario-0                               3        0     2/2  3 sigkill");
}

TEST(ConsoleSummary, AViolationComesRightAfterTheVerdictWithItsReproduceCommand) {
  RunResult r = GreenSoak();
  TrialResult bad = Trial("scenario-7", 3, Verdict::kInvalid, "prefix.unique");
  for (auto& c : bad.checks) c.problems.resize(std::min<std::size_t>(c.problems.size(), 1));  // one shape: one bucket
  r.add(bad);
  const auto lines = NonEmptyLines(Console(r));
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("verdict invalid: 127 trials of 42 scenarios", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("buckets: 1 new, 0 known", 0), 0u) << lines[1];
  EXPECT_NE(lines[2].find("NEW"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("prefix.unique/scenario-7/"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3], "        reproduce: shmstress run scenarios/scenario-7.toml --seed 7 --trial 3");
  EXPECT_EQ(lines[4], "        job 1 rank 0 was granted prefix 0 while job 0 held it");
  EXPECT_LE(lines.size(), 25u);
}

TEST(ConsoleSummary, AnUnknownCheckSaysWhyAndHowToReproduceIt) {
  RunResult r = GreenSoak();
  r.add(Trial("scenario-9", 1, Verdict::kUnknown, "barrier.liveness"));
  const std::string console = Console(r);
  EXPECT_NE(console.find("\nunknown scenario-9 trial 1 (seed 101): barrier.liveness\n"
                         "  reproduce: shmstress run scenarios/scenario-9.toml --seed 7 --trial 1\n"
                         "  job 1 rank 0 was granted prefix 0 while job 0 held it\n"
                         "  second problem\n"
                         "  third\n"
                         "  trial dir: /runs/x/scenario-9/trial-1\n"),
            std::string::npos)
      << console;
  EXPECT_EQ(console.find("fourth"), std::string::npos) << "more than 3 problems per check:\n" << console;
}

TEST(ConsoleSummary, ManyUnknownChecksShowTenAndCountTheRest) {
  RunResult r = GreenSoak();
  for (int i = 0; i < 13; ++i) r.add(Trial("scenario-1", 10 + i, Verdict::kUnknown, "barrier.liveness"));
  const std::string console = Console(r);
  std::size_t shown = 0;
  for (std::size_t at = console.find("\nunknown "); at != std::string::npos; at = console.find("\nunknown ", at + 1)) ++shown;
  EXPECT_EQ(shown, 10u);
  EXPECT_NE(console.find("(3 more not-valid checks: see summary.json)"), std::string::npos) << console;
}

TEST(ConsoleSummary, AStateNeverReachedIsShownOnAGreenRun) {
  RunResult r = GreenSoak();
  r.expect_reached["scenario-3"].push_back("cleanup-killed-retiring");
  const std::string console = Console(r);
  EXPECT_NE(console.find("\nnever reached: scenario-3: cleanup-killed-retiring\n"), std::string::npos) << console;
  EXPECT_EQ(NonEmptyLines(console)[0].rfind("verdict valid:", 0), 0u);
}

}  // namespace
}  // namespace reports
