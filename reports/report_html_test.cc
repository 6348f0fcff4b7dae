#include <gtest/gtest.h>

#include "reports/reports.h"

namespace reports {
namespace {

harness::RunResult failing_run() {
  harness::RunResult r;
  r.run_id = "r1";
  r.out_dir = "/runs/r1";
  r.seed = 42;
  harness::TrialResult t;
  t.scenario = "kill-holder";
  t.trial = 3;
  t.kept = true;
  t.dir = "/runs/r1/kill-holder/trial-3";
  t.reproduce = "build/shmstress run scenarios/kill-holder.toml --seed 42 --trial 3";
  harness::CheckResult c;
  c.invariant = "cleanup.safety";
  c.verdict = harness::Verdict::kInvalid;
  c.problems = {"removed /x while <pid 7> held prefix 0"};
  t.checks = {c};
  t.verdict = harness::Verdict::kInvalid;
  t.faults = {{"sigkill", 1}};
  t.acquire_ms = {0.5, 1.5, 3.0};
  r.add(t);
  return r;
}

TEST(ReportHtml, NamesTheVerdictAndLinksTheFailingTrialsTimelineRelatively) {
  std::string h = report_html(failing_run());
  EXPECT_NE(h.find("class=\"badge invalid\">invalid</span></h1>"), std::string::npos);
  EXPECT_NE(h.find("href=\"kill-holder/trial-3/timeline.html\""), std::string::npos) << "relative: works from a CI artifact";
  EXPECT_NE(h.find("--seed 42 --trial 3"), std::string::npos) << "the reproduce command";
  EXPECT_NE(h.find("<td class=s>sigkill</td><td>1</td>"), std::string::npos);
  EXPECT_NE(h.find("acquire — 3 samples"), std::string::npos);
}

TEST(ReportHtml, EscapesWhatWorkersWrote) {
  std::string h = report_html(failing_run());
  EXPECT_EQ(h.find("<pid 7>"), std::string::npos);
  EXPECT_NE(h.find("&lt;pid 7&gt;"), std::string::npos);
  EXPECT_EQ(h.find("<script"), std::string::npos) << "the page runs no script";
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
  EXPECT_NE(h.find("<p class=muted>none</p>"), std::string::npos);
}

}  // namespace
}  // namespace reports
