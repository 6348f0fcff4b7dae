// What the oracle adds to every report: an excused invariant is shown with its
// reason and counts for nothing; events that did not fit the protocol are
// shown (console, summary.json, JUnit) and make the trial at best unknown; a
// known-bad scenario says whether it was caught for the reason it names.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "reports/reports.h"

namespace reports {
namespace {

using harness::CheckResult;
using harness::Expectation;
using harness::RunResult;
using harness::TrialResult;
using harness::Verdict;

CheckResult Check(const std::string& inv, Verdict v, std::string excused = "") {
  CheckResult c;
  c.invariant = inv;
  c.verdict = v;
  if (v != Verdict::kValid) c.problems = {inv + " went wrong"};
  c.excused = std::move(excused);
  return c;
}

TrialResult Trial(const std::string& scenario, int n, std::vector<CheckResult> checks) {
  TrialResult t;
  t.scenario = scenario;
  t.trial = n;
  for (auto& c : checks) {
    if (c.excused.empty()) t.verdict = harness::compose(t.verdict, c.verdict);
    t.checks.push_back(std::move(c));
  }
  t.dir = "/runs/x/" + scenario + "/trial-" + std::to_string(n);
  t.reproduce = "shmstress run " + scenario + ".toml --trial " + std::to_string(n);
  return t;
}

RunResult SampleRun() {
  RunResult r;
  r.run_id = "notes";
  // An excused invariant that was invalid: the trial stays valid.
  r.add(Trial("leaky", 0,
              {Check("cleanup.no-leak", Verdict::kInvalid, "another user's registry stays"),
               Check("prefix.unique", Verdict::kValid)}));
  // Events that did not fit the protocol.
  TrialResult h = Trial("garbled", 0, {Check("prefix.unique", Verdict::kValid)});
  h.history_errors = {"event 3 (t=5): unknown event type \"gossip\""};
  h.history_error_count = 1;
  h.verdict = Verdict::kUnknown;
  r.add(h);
  // A known-bad subject: one trial caught for the right reason, one for another.
  TrialResult met = Trial("race", 0, {Check("prefix.agreement", Verdict::kInvalid)});
  met.expected = "prefix.agreement with error:acquire:file-exists";
  met.expectation = Expectation::kMet;
  r.add(met);
  TrialResult other = Trial("race", 1, {Check("prefix.progress", Verdict::kInvalid)});
  other.expected = met.expected;
  other.expectation = Expectation::kOther;
  r.add(other);
  TrialResult missed = Trial("gap", 0, {Check("prefix.unique", Verdict::kInvalid)});
  missed.expected = "prefix.exclusive-local";
  missed.expectation = Expectation::kOther;
  r.add(missed);
  return r;
}

std::string Console(const RunResult& r) {
  char* buf = nullptr;
  std::size_t len = 0;
  FILE* f = ::open_memstream(&buf, &len);
  console_summary(f, r, false);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

TEST(VerdictNotes, AnExcusedInvariantIsShownWithItsReasonAndCountsForNothing) {
  RunResult r = SampleRun();
  EXPECT_EQ(r.tally.scenarios().at("leaky").violating, 0u);
  const std::string console = Console(r);
  EXPECT_NE(console.find("excused: leaky cleanup.no-leak (invalid in 1 trials, not counted): another "
                         "user's registry stays"),
            std::string::npos)
      << console;
  EXPECT_EQ(console.find("invalid leaky trial 0"), std::string::npos) << console;
  auto j = summary_json(r);
  EXPECT_EQ(j["scenarios"]["leaky"]["invariants"]["cleanup.no-leak"], "excused");
  EXPECT_EQ(j["scenarios"]["leaky"]["excused"]["cleanup.no-leak"]["reason"], "another user's registry stays");
  for (const auto& v : j["violations"]) EXPECT_NE(v["invariant"], "cleanup.no-leak");
  const std::string xml = junit_xml(r);
  EXPECT_NE(xml.find("<skipped type=\"excused\" message=\"excused: another user&apos;s registry stays"),
            std::string::npos)
      << xml;
  EXPECT_NE(metrics_text(r, MetricsOptions{}).find(
                "shmstress_violations_total{scenario=\"leaky\",invariant=\"cleanup.no-leak\",subject=\"native\"} 0"),
            std::string::npos);
}

TEST(VerdictNotes, HistoryErrorsAreInTheConsoleSummaryAndJUnit) {
  RunResult r = SampleRun();
  const std::string console = Console(r);
  EXPECT_NE(console.find("history errors in garbled trial 0 (1; the trial is at best unknown):\n"
                         "  event 3 (t=5): unknown event type \"gossip\""),
            std::string::npos)
      << console;
  auto j = summary_json(r);
  ASSERT_TRUE(j.contains("history_errors"));
  EXPECT_EQ(j["history_errors"][0]["scenario"], "garbled");
  EXPECT_EQ(j["history_errors"][0]["errors"][0], "event 3 (t=5): unknown event type \"gossip\"");
  EXPECT_EQ(j["scenarios"]["garbled"]["history_errors"]["trials"], 1);
  const std::string xml = junit_xml(r);
  EXPECT_NE(xml.find("<testcase classname=\"garbled\" name=\"history\">"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<error type=\"history\" message=\"events that do not fit the worker protocol in 1 of 1"),
            std::string::npos)
      << xml;
  EXPECT_EQ(r.exit_code(), 1);  // the other scenarios' violations; alone it would be 4
}

TEST(VerdictNotes, AKnownBadRunIsCaughtOnlyByTheExpectedInvariantWithItsEvidence) {
  RunResult r = SampleRun();
  const std::string console = Console(r);
  EXPECT_NE(console.find("expectation race: caught in 1 of 2 trials (prefix.agreement with "
                         "error:acquire:file-exists)"),
            std::string::npos)
      << console;
  EXPECT_NE(console.find("expectation gap: NOT caught in 1 trials: expected prefix.exclusive-local; "
                         "1 broke only other invariants"),
            std::string::npos)
      << console;
  auto j = summary_json(r);
  EXPECT_EQ(j["scenarios"]["race"]["expectation"]["caught"], true);
  EXPECT_EQ(j["scenarios"]["gap"]["expectation"]["caught"], false);
  EXPECT_EQ(j["scenarios"]["gap"]["expectation"]["other"], 1);
  EXPECT_EQ(j["expectations"].size(), 2u);
  const std::string xml = junit_xml(r);
  EXPECT_NE(xml.find("<testcase classname=\"gap\" name=\"expect_violation\">\n      <skipped "
                     "type=\"not-caught\""),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testcase classname=\"race\" name=\"expect_violation\"/>"), std::string::npos) << xml;
}

}  // namespace
}  // namespace reports
