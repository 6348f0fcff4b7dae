#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/triage.h"
#include "reports/reports.h"

namespace reports {
namespace {

namespace fs = std::filesystem;
using harness::CheckResult;
using harness::RunResult;
using harness::TrialResult;
using harness::Verdict;

CheckResult Check(const std::string& inv, Verdict v, std::vector<std::string> problems = {}) {
  CheckResult c;
  c.invariant = inv;
  c.verdict = v;
  c.problems = std::move(problems);
  return c;
}

TrialResult Trial(const std::string& scenario, int n, std::vector<CheckResult> checks) {
  TrialResult t;
  t.scenario = scenario;
  t.scenario_file = "scenarios/" + scenario + ".toml";
  t.trial = n;
  t.run_seed = 7;
  t.seed = 1000 + n;
  t.seconds = 0.25;
  t.checks = std::move(checks);
  for (const auto& c : t.checks) t.verdict = harness::compose(t.verdict, c.verdict);
  if (t.verdict != Verdict::kValid) {
    t.kept = true;
    t.dir = "/runs/r/" + scenario + "/trial-" + std::to_string(n);
    t.reproduce =
        "shmstress run scenarios/" + scenario + ".toml --seed 7 --trial " + std::to_string(n);
  }
  return t;
}

// Two scenarios: "basic" with a violation in one trial of two, "stop" with an
// inconclusive invariant, a harness error and a never-reached state.
std::vector<TrialResult> SampleTrials() {
  std::vector<TrialResult> trials;
  trials.push_back(
      Trial("basic", 0,
            {Check("prefix.unique", Verdict::kValid), Check("cleanup.safety", Verdict::kValid)}));
  trials.push_back(Trial(
      "basic", 1,
      {Check("prefix.unique", Verdict::kValid),
       Check("cleanup.safety", Verdict::kInvalid, {"cleanup by job 0 rank 1 (pid 5) removed x"})}));
  auto t =
      Trial("stop", 0,
            {Check("barrier.liveness", Verdict::kUnknown, {"barrier of job 0 rank 0 cut off"})});
  t.harness_error = true;
  t.harness_error_text = "supervisor exited abnormally";
  trials.push_back(t);
  return trials;
}

RunResult Sample(const std::vector<TrialResult>& trials = SampleTrials()) {
  RunResult r;
  r.run_id = "20260101-000000-1";
  r.seed = 7;
  r.elapsed = 1.5;
  for (const auto& t : trials) r.add(t);
  r.expect_reached["stop"] = {"cleanup-while-owner-stopped"};
  return r;
}

std::size_t Count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

const char* kXmllint = "/usr/bin/xmllint";

std::string Schema() { return std::string(SHMSTRESS_SOURCE_DIR) + "/tests/junit/junit.xsd"; }

// Runs a shell command, returns (exit status, stdout+stderr).
std::pair<int, std::string> Shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/shmstress-reports-test.XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string path() const { return path_; }

 private:
  std::string path_;
};

// The testcase name of the bucket of `problem` (invariant/hash).
std::string BucketCase(const std::string& scenario, const std::string& inv, const std::string& problem) {
  const std::string id = harness::make_fingerprint(inv, scenario, harness::problem_shape(problem)).id;
  return inv + "/" + id.substr(id.rfind('/') + 1);
}

TEST(JUnit, OneTestcasePerScenarioAndInvariantAndOnePerBucket) {
  std::string x = junit_xml(Sample());
  EXPECT_EQ(Count(x, "<testsuite "), 2u);
  EXPECT_NE(x.find("<testcase classname=\"basic\" name=\"prefix.unique\"/>"), std::string::npos)
      << x;
  // A violated invariant: a testcase per bucket instead of the invariant's own.
  const std::string bucket = BucketCase("basic", "cleanup.safety", "cleanup by job 0 rank 1 (pid 5) removed x");
  EXPECT_NE(x.find("<testcase classname=\"basic\" name=\"" + bucket + "\">"), std::string::npos)
      << x;
  EXPECT_EQ(x.find("name=\"cleanup.safety\""), std::string::npos) << x;
  EXPECT_NE(x.find("<testcase classname=\"stop\" name=\"barrier.liveness\">"), std::string::npos)
      << x;
  // Verdicts: invalid -> failure, unknown -> skipped, harness error -> error.
  EXPECT_EQ(Count(x, "<failure "), 1u);
  EXPECT_EQ(Count(x, "<skipped "), 2u);  // barrier.liveness and expect_reached
  EXPECT_EQ(Count(x, "<error "), 1u);
  EXPECT_NE(
      x.find("name=\"basic\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"0.500\""),
      std::string::npos)
      << x;
  EXPECT_NE(
      x.find("name=\"stop\" tests=\"3\" failures=\"0\" errors=\"1\" skipped=\"2\" time=\"0.250\""),
      std::string::npos)
      << x;
  EXPECT_NE(
      x.find(
          "<testsuites name=\"shmstress\" tests=\"5\" failures=\"1\" errors=\"1\" time=\"1.500\">"),
      std::string::npos)
      << x;
}

TEST(JUnit, PropertiesAndFailureText) {
  std::string x = junit_xml(Sample());
  EXPECT_NE(x.find("<property name=\"seed\" value=\"7\"/>"), std::string::npos);
  EXPECT_NE(x.find("<property name=\"trials\" value=\"2\"/>"), std::string::npos);
  EXPECT_NE(x.find("<property name=\"subject\" value=\"native\"/>"), std::string::npos);
  const std::string fp =
      harness::make_fingerprint("cleanup.safety", "basic", harness::problem_shape("cleanup by job 0 rank 1 (pid 5) removed x")).id;
  EXPECT_NE(x.find("message=\"cleanup.safety violated in 1 of 2 trials (new: " + fp +
                   "); reproduce: shmstress run scenarios/basic.toml --seed 7 --trial 1\""),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("Shape: cleanup by job &lt;n&gt; rank &lt;n&gt; (pid &lt;n&gt;) removed x\n"), std::string::npos) << x;
  EXPECT_NE(x.find("  cleanup by job 0 rank 1 (pid 5) removed x\n"), std::string::npos);
  EXPECT_NE(x.find("  trial dir: /runs/r/basic/trial-1\n"), std::string::npos);
  EXPECT_NE(x.find("  reproduce: shmstress run scenarios/basic.toml --seed 7 --trial 1\n"),
            std::string::npos);
  EXPECT_NE(x.find("never reached: cleanup-while-owner-stopped"), std::string::npos);
}

TEST(JUnit, UnavailableSubjectIsSkippedNotPassed) {
  RunResult r;
  TrialResult t;
  t.scenario = "permission-uid";
  t.verdict = Verdict::kUnknown;
  t.unavailable = "needs root";
  r.add(t), r.add(t);
  std::string x = junit_xml(r);
  EXPECT_NE(x.find("<testsuite name=\"permission-uid\" tests=\"1\" failures=\"0\" errors=\"0\" "
                   "skipped=\"1\""),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("message=\"subject native not available in 2 of 2 trials: needs root\""),
            std::string::npos)
      << x;
}

TEST(JUnit, EmptyRunIsAValidDocument) {
  RunResult r;
  std::string x = junit_xml(r);
  EXPECT_NE(
      x.find(
          "<testsuites name=\"shmstress\" tests=\"0\" failures=\"0\" errors=\"0\" time=\"0.000\">"),
      std::string::npos);
}

TEST(XmlEscape, MarkupQuotesAndLineBreaks) {
  EXPECT_EQ(xml_escape("a<b>&c", false), "a&lt;b&gt;&amp;c");
  EXPECT_EQ(xml_escape("\"q\" 'a'\n\t\r", false), "\"q\" 'a'\n\t&#13;");
  EXPECT_EQ(xml_escape("\"q\" 'a'\n\t\r", true), "&quot;q&quot; &apos;a&apos;&#10;&#9;&#13;");
}

TEST(XmlEscape, ForbiddenCharactersAndBadUtf8BecomeReplacementChar) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(xml_escape(std::string("a\x01"
                                   "b",
                                   3),
                       false),
            "a" + fffd + "b");
  EXPECT_EQ(xml_escape(std::string("\0", 1), false), fffd);
  EXPECT_EQ(xml_escape("\xff", false), fffd);
  EXPECT_EQ(xml_escape("\xC0\xAF", false), fffd + fffd);             // overlong '/'
  EXPECT_EQ(xml_escape("\xED\xA0\x80", false), fffd + fffd + fffd);  // a surrogate
  EXPECT_EQ(xml_escape("\xE2\x82", false), fffd + fffd);             // truncated
  EXPECT_EQ(xml_escape("\xEF\xBF\xBE", false), fffd);  // U+FFFE is not an XML character
  EXPECT_EQ(xml_escape("caf\xC3\xA9 \xF0\x9F\x98\x80", false),
            "caf\xC3\xA9 \xF0\x9F\x98\x80");  // kept
}

// What a CI server parses: the schema-valid document, with the original text
// recovered from the escaped attribute and body.
TEST(JUnit, ValidAgainstSchemaEvenWithHostileText) {
  if (::access(kXmllint, X_OK) != 0)
    GTEST_SKIP() << "xmllint not installed (scripts/setup installs libxml2-utils)";
  auto trials = SampleTrials();
  const std::string nasty = "bad <tag> & \"quotes\" 'apos' ]]> \x01\x1f \xff tab\there";
  trials[1].checks[1].problems.push_back(nasty);
  trials[1].reproduce = "shmstress run 'my scenarios/a&b.toml' --seed 7 --trial 1";
  trials[1].scenario = "odd \"name\" <x>";
  RunResult r = Sample(trials);
  r.subject = "native";
  TempDir dir;
  const std::string file = dir.path() + "/junit.xml";
  ASSERT_FALSE(harness::write_output(file, junit_xml(r), harness::OutputOrigin::kUser));
  auto [rc, out] = Shell(std::string(kXmllint) + " --noout --schema " + Schema() + " " + file);
  EXPECT_EQ(rc, 0) << out;
  auto [rc2, msg] =
      Shell(std::string(kXmllint) +
            " --xpath 'string(//testcase[starts-with(@name, \"cleanup.safety/\")]/failure/@message)' " + file);
  EXPECT_EQ(rc2, 0);
  EXPECT_NE(msg.find("reproduce: shmstress run 'my scenarios/a&b.toml' --seed 7 --trial 1"),
            std::string::npos)
      << msg;
  auto [rc3, cls] =
      Shell(std::string(kXmllint) + " --xpath 'string(//failure/../@classname)' " + file);
  while (!cls.empty() && cls.back() == '\n') cls.pop_back();
  EXPECT_EQ(cls, "odd \"name\" <x>");
  auto [rc4, body] = Shell(std::string(kXmllint) + " --xpath 'string(//failure)' " + file);
  EXPECT_NE(
      body.find(
          "bad <tag> & \"quotes\" 'apos' ]]> \xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD tab\there"),
      std::string::npos)
      << body;
}

// With a baseline: a known bucket is skipped (type "known", with its reason),
// a new one fails, a known one that did not recur is a passing testcase that
// says so; the document still validates.
TEST(JUnit, KnownBucketsAreSkippedNewOnesFailAndAbsentOnesPass) {
  const std::string known_problem = "cleanup by job 0 rank 1 (pid 5) removed x";
  const std::string new_problem = "left in /dev/shm after the cleanup step: /a, /b";
  auto base = std::make_shared<harness::Baseline>();
  base->file = "known.txt";
  auto add = [&](const std::string& fp, const std::string& reason) {
    harness::KnownFailure k;
    k.fingerprint = fp;
    k.reason = reason;
    base->known[fp] = k;
  };
  add(harness::make_fingerprint("cleanup.safety", "basic", harness::problem_shape(known_problem)).id,
      "upstream bug 12");
  add("prefix.unique/basic/0123456789ab", "flaky once in a while");
  RunResult r;
  r.seed = 7;
  r.tally.buckets().set_baseline(base);
  r.add(Trial("basic", 0, {Check("cleanup.safety", Verdict::kInvalid, {known_problem}),
                           Check("prefix.unique", Verdict::kValid),
                           Check("cleanup.no-leak", Verdict::kValid)}));
  r.add(Trial("basic", 1, {Check("cleanup.safety", Verdict::kValid), Check("prefix.unique", Verdict::kValid),
                           Check("cleanup.no-leak", Verdict::kInvalid, {new_problem})}));
  const std::string x = junit_xml(r);
  EXPECT_NE(x.find("name=\"" + BucketCase("basic", "cleanup.safety", known_problem) +
                   "\">\n      <skipped type=\"known\" message=\"known failure, recurred in 1 of 2 trials: "
                   "upstream bug 12\""),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("name=\"" + BucketCase("basic", "cleanup.no-leak", new_problem) +
                   "\">\n      <failure type=\"invalid\""),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<testcase classname=\"basic\" name=\"prefix.unique\"/>"), std::string::npos) << x;
  EXPECT_NE(x.find("<testcase classname=\"basic\" name=\"prefix.unique/0123456789ab\">\n      "
                   "<system-out>Known failure prefix.unique/basic/0123456789ab did not recur in 2 trials "
                   "(flaky once in a while)."),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("name=\"basic\" tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"1\""), std::string::npos)
      << x;
  EXPECT_EQ(r.exit_code(), 1);  // the new bucket
  if (::access(kXmllint, X_OK) != 0) GTEST_SKIP() << "xmllint not installed";
  TempDir dir;
  const std::string file = dir.path() + "/junit.xml";
  ASSERT_FALSE(harness::write_output(file, x, harness::OutputOrigin::kUser));
  auto [rc, out] = Shell(std::string(kXmllint) + " --noout --schema " + Schema() + " " + file);
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace reports
