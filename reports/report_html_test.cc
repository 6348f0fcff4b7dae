#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reports/reports.h"

namespace reports {
namespace {

const char* kInvariants[] = {"barrier.liveness", "cleanup.safety", "prefix.unique"};

// One trial of `scenario` in which every invariant held, but `bad` (if given)
// which got `v`.
harness::TrialResult trial(const std::string& scenario, int n, const std::string& bad = "",
                           harness::Verdict v = harness::Verdict::kValid) {
  harness::TrialResult t;
  t.scenario = scenario;
  t.trial = n;
  for (const char* inv : kInvariants) {
    harness::CheckResult c;
    c.invariant = inv;
    if (inv == bad) {
      c.verdict = v;
      c.problems = {"removed /x while <pid 7> held prefix 0"};
      t.verdict = v;
    }
    t.checks.push_back(c);
  }
  return t;
}

harness::RunResult failing_run() {
  harness::RunResult r;
  r.run_id = "r1";
  r.out_dir = "/runs/r1";
  r.seed = 42;
  harness::TrialResult t = trial("kill-holder", 3, "cleanup.safety", harness::Verdict::kInvalid);
  t.kept = true;
  t.dir = "/runs/r1/kill-holder/trial-3";
  t.reproduce = "build/shmstress run scenarios/kill-holder.toml --seed 42 --trial 3";
  t.faults = {{"sigkill", 1}};
  t.reached = {"killed-holding-prefix"};
  t.acquire_ms = {0.5, 1.5, 3.0};
  r.add(t);
  r.add(trial("basic", 0));
  r.expect_reached["kill-holder"] = {"killed-holding-prefix", "cleanup-while-owner-alive"};
  return r;
}

// A run in which every invariant held in every trial of many scenarios.
harness::RunResult green_run() {
  harness::RunResult r;
  r.run_id = "green";
  r.out_dir = "/runs/green";
  for (int s = 0; s < 12; ++s) {
    for (int n = 0; n < 3; ++n) {
      harness::TrialResult t = trial("scenario-" + std::to_string(s), n);
      t.faults = {{"sigkill", 1 + s % 3}};
      t.reached = {"state-a"};
      r.add(t);
    }
    r.expect_reached["scenario-" + std::to_string(s)] = {"state-a"};
  }
  return r;
}

// Where each section starts; npos if it is missing.
std::vector<std::size_t> sections(const std::string& h) {
  std::vector<std::size_t> at;
  for (const char* id : {"id=\"verdict\"", "id=\"violations\"", "id=\"coverage\"", "id=\"latency\"", "id=\"invariants\""})
    at.push_back(h.find(id));
  return at;
}

TEST(ReportHtml, NamesTheVerdictAndLinksTheFailingTrialsTimelineRelatively) {
  std::string h = report_html(failing_run());
  EXPECT_NE(h.find("class=\"badge invalid\">invalid</span></h1>"), std::string::npos);
  EXPECT_NE(h.find("href=\"kill-holder/trial-3/timeline.html\""), std::string::npos) << "relative: works from a CI artifact";
  EXPECT_NE(h.find("--seed 42 --trial 3"), std::string::npos) << "the reproduce command";
  EXPECT_NE(h.find("<b>acquire</b> — 3 samples"), std::string::npos);
}

TEST(ReportHtml, SectionsComeInTheOrderAPersonReadsThem) {
  for (const auto& r : {failing_run(), green_run()}) {
    const std::string h = report_html(r);
    const auto at = sections(h);
    for (std::size_t i = 0; i < at.size(); ++i) ASSERT_NE(at[i], std::string::npos) << "section " << i << " missing";
    for (std::size_t i = 1; i < at.size(); ++i) EXPECT_LT(at[i - 1], at[i]) << "section " << i << " out of order";
    // The verdict section holds the badge and the exit code; the buckets come
    // before the coverage heat map, the heat map before the latency.
    EXPECT_LT(h.find("class=\"badge "), at[1]);
    EXPECT_LT(h.find("exit code "), at[1]);
    if (r.run_id == "r1") {
      EXPECT_GT(h.find("class=buckets"), at[1]);
      EXPECT_LT(h.find("class=buckets"), at[2]);
    }
    EXPECT_GT(h.find("class=heat"), at[2]);
    EXPECT_LT(h.find("class=heat"), at[3]);
    EXPECT_GT(h.find("<svg"), at[3]);
  }
}

TEST(ReportHtml, ABucketCarriesItsReproduceReplayAndShrinkCommands) {
  const std::string h = report_html(failing_run());
  const std::size_t buckets = h.find("class=buckets"), coverage = h.find("id=\"coverage\"");
  ASSERT_NE(buckets, std::string::npos);
  const std::string part = h.substr(buckets, coverage - buckets);
  EXPECT_NE(part.find("<b>new</b>"), std::string::npos);
  EXPECT_NE(part.find("build/shmstress run scenarios/kill-holder.toml --seed 42 --trial 3"), std::string::npos);
  EXPECT_NE(part.find("build/shmstress replay /runs/r1/kill-holder/trial-3 --times 10"), std::string::npos)
      << "the same binary as the reproduce command";
  EXPECT_NE(part.find("build/shmstress shrink /runs/r1/kill-holder/trial-3"), std::string::npos);
  // The verdict says how many buckets are new and known before anything else.
  EXPECT_NE(h.find("1 new bucket, 0 known buckets"), std::string::npos);
  EXPECT_LT(h.find("1 new bucket, 0 known buckets"), h.find("id=\"violations\""));
}

TEST(ReportHtml, BucketsPastTheFirstTenAreFoldedSoTheCoverageStaysNearTheTop) {
  harness::RunResult r;
  r.run_id = "many";
  for (int s = 0; s < 12; ++s) {
    harness::TrialResult t = trial("s" + std::to_string(s), 0, "prefix.unique", harness::Verdict::kInvalid);
    t.reproduce = "shmstress run s.toml --trial 0";
    r.add(t);
  }
  const std::string h = report_html(r);
  const std::size_t fold = h.find("<details><summary>2 more buckets</summary>");
  ASSERT_NE(fold, std::string::npos);
  std::size_t open_rows = 0;
  for (std::size_t at = h.find("<b>new</b>"); at < fold; at = h.find("<b>new</b>", at + 1)) ++open_rows;
  EXPECT_EQ(open_rows, 10u);
  EXPECT_LT(fold, h.find("id=\"coverage\""));
}

TEST(ReportHtml, ReplayCommandsQuoteABinaryAndADirThatNeedIt) {
  harness::RunResult r = failing_run();
  harness::TrialResult t = trial("odd", 1, "prefix.unique", harness::Verdict::kInvalid);
  t.kept = true;
  t.dir = "/runs/r1/odd dir/trial-1";
  t.reproduce = "'/opt/my tools/shmstress' run 'scenarios/odd.toml' --seed 42 --trial 1";
  r.add(t);
  const std::string h = report_html(r);
  EXPECT_NE(h.find("&#39;/opt/my tools/shmstress&#39; replay &#39;/runs/r1/odd dir/trial-1&#39; --times 10"),
            std::string::npos);
}

TEST(ReportHtml, EscapesWhatWorkersWrote) {
  std::string h = report_html(failing_run());
  EXPECT_EQ(h.find("<pid 7>"), std::string::npos);
  EXPECT_NE(h.find("&lt;pid 7&gt;"), std::string::npos);
  EXPECT_EQ(h.find("<script"), std::string::npos) << "the page runs no script";
}

TEST(ReportHtml, EscapesHostileNamesInTextAndInTitles) {
  harness::RunResult r;
  r.run_id = "<b>run";
  r.subject = "exec:<img src=x>";
  harness::TrialResult t;
  t.scenario = "s\"><script>x</script>";
  harness::CheckResult c;
  c.invariant = "inv\"<i>";
  c.verdict = harness::Verdict::kUnknown;
  c.problems = {"</td><script>"};
  t.checks = {c};
  t.verdict = harness::Verdict::kUnknown;
  t.faults = {{"kind\"><svg onload=x>", 2}};
  t.reached = {"st<a>te"};
  t.kept = true;
  t.dir = "/o/'; rm -rf ~ #";
  t.reproduce = "shmstress run '<x>'";
  r.add(t);
  r.expect_reached[t.scenario] = {"st<a>te", "never\"<u>"};
  const std::string h = report_html(r);
  for (const char* raw : {"<b>run", "<img", "<script", "<i>", "<svg onload", "<a>", "<u>", "<x>"})
    EXPECT_EQ(h.find(raw), std::string::npos) << raw;
  EXPECT_NE(h.find("&lt;img src=x&gt;"), std::string::npos);
  EXPECT_NE(h.find("class=\"m unknown\""), std::string::npos) << "its unknown cell is shown";
}

TEST(ReportHtml, AGreenRunHasNoMatrixOfValidCells) {
  const std::string h = report_html(green_run());
  EXPECT_NE(h.find("class=\"badge valid\">valid</span></h1>"), std::string::npos);
  EXPECT_NE(h.find("every invariant held in all 36 trials of 12 scenarios"), std::string::npos);
  EXPECT_NE(h.find("Every invariant held in every scenario: 3 invariants checked in 12 scenarios"), std::string::npos);
  EXPECT_EQ(h.find("class=matrix"), std::string::npos) << "no scenario x invariant table at all";
  EXPECT_EQ(h.find(">valid</td>"), std::string::npos) << "no cell that only says valid";
  EXPECT_EQ(h.find("class=\"m "), std::string::npos);
  EXPECT_EQ(h.find("class=buckets"), std::string::npos);
  EXPECT_NE(h.find("none: no trial violated an invariant"), std::string::npos);
  // Coverage: one heat map row per scenario, its expected state reached by every trial.
  EXPECT_NE(h.find("class=\"sq r4\" title=\"state-a: reached in 3 of 3 trials\""), std::string::npos);
  EXPECT_NE(h.find("title=\"scenario-2, sigkill: 9 in 3 trials (3.0 per trial)\">9</td>"), std::string::npos);
}

TEST(ReportHtml, TheMatrixShowsOnlyWhatWasNotValid) {
  harness::RunResult r = failing_run();
  for (int n = 0; n < 3; ++n) r.add(trial("unrelated-" + std::to_string(n), 0));
  const std::string h = report_html(r);
  const std::size_t inv = h.find("id=\"invariants\"");
  ASSERT_NE(inv, std::string::npos);
  const std::string part = h.substr(inv);
  EXPECT_NE(part.find("class=matrix"), std::string::npos);
  EXPECT_NE(part.find("<td class=\"m invalid\" title=\"cleanup.safety in kill-holder: invalid in 1 of 1 trials (1 new, 0 known)\">1</td>"),
            std::string::npos)
      << "the non-valid cell";
  EXPECT_NE(part.find("<span>cleanup.safety</span>"), std::string::npos);
  EXPECT_EQ(part.find("<span>prefix.unique</span>"), std::string::npos) << "a column that held everywhere is left out";
  EXPECT_EQ(part.find("basic"), std::string::npos) << "a row that held everywhere is left out";
  EXPECT_EQ(part.find("unrelated-0"), std::string::npos);
  EXPECT_EQ(part.find(">valid</td>"), std::string::npos);
}

TEST(ReportHtml, StatesNeverReachedAreNamedInTheVerdictAndTheHeatMap) {
  const std::string h = report_html(failing_run());
  const std::size_t violations = h.find("id=\"violations\"");
  const std::size_t first = h.find("kill-holder: cleanup-while-owner-alive");
  ASSERT_NE(first, std::string::npos);
  EXPECT_LT(first, violations) << "in the verdict";
  EXPECT_NE(h.find("<span class=miss>never: cleanup-while-owner-alive</span>"), std::string::npos);
  EXPECT_NE(h.find("class=\"sq r0\" title=\"cleanup-while-owner-alive: reached in 0 of 1 trials\""), std::string::npos);
}

TEST(ReportHtml, AGreenRunSaysSoAndListsNoViolations) {
  harness::RunResult r;
  r.run_id = "green";
  harness::TrialResult t;
  t.scenario = "basic";
  harness::CheckResult c;
  c.invariant = "prefix.unique";
  t.checks = {c};
  r.add(t);
  std::string h = report_html(r);
  EXPECT_NE(h.find("class=\"badge valid\">valid"), std::string::npos);
  EXPECT_NE(h.find("exit 0"), std::string::npos);
  EXPECT_NE(h.find("no faults injected"), std::string::npos);
}

}  // namespace
}  // namespace reports
