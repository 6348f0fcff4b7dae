#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "reports/reports.h"

namespace reports {
namespace {

namespace fs = std::filesystem;
using harness::Json;

constexpr std::int64_t kT0 = 5'000'000'000;
constexpr std::int64_t kMs = 1'000'000;

Json Ev(std::int64_t ms, Json fields) {
  fields["t"] = kT0 + ms * kMs;
  return fields;
}
Json Worker(std::int64_t ms, const char* type, int job, int rank, int pid, std::int64_t id,
            const char* op, Json extra = {}) {
  Json j = {{"type", type}, {"job", job}, {"rank", rank}, {"local_rank", rank},
            {"pid", pid},   {"id", id},   {"op", op}};
  if (extra.is_object()) j.update(extra);
  return Ev(ms, j);
}

// Two ranks of job 0: rank 0 acquires prefix 0 and runs a barrier, rank 1
// cleans and removes rank 0's segment; rank 1 is then SIGKILLed and rank 0
// stopped for a while. The cleanup worker (job -1) runs last.
std::vector<Json> Events() {
  return {
      Ev(0, {{"type", "trial"}, {"phase", "start"}}),
      Worker(1, "invoke", 0, 0, 10, 1, "acquire", {{"args", {{"local_world_size", 2}}}}),
      Worker(2, "ok", 0, 0, 10, 1, "acquire", {{"value", {{"prefix", 0}}}}),
      Worker(3, "invoke", 0, 1, 11, 1, "clean", {{"args", Json::object()}}),
      Worker(4, "ok", 0, 1, 11, 1, "clean",
             {{"value", {{"removed", {"/shmstress.000000_barrier"}}}}}),
      Worker(5, "invoke", 0, 0, 10, 2, "barrier", {{"args", {{"round", 1}}}}),
      Ev(5, {{"type", "fault"},
             {"kind", "sigkill"},
             {"phase", "instant"},
             {"job", 0},
             {"rank", 1},
             {"pid", 11}}),
      Ev(5, {{"type", "exit"},
             {"job", 0},
             {"rank", 1},
             {"pid", 11},
             {"signal", 9},
             {"by_harness", true}}),
      Ev(6, {{"type", "fault"},
             {"kind", "sigstop"},
             {"phase", "start"},
             {"job", 0},
             {"rank", 0},
             {"pid", 10}}),
      Ev(8, {{"type", "fault"},
             {"kind", "sigstop"},
             {"phase", "end"},
             {"job", 0},
             {"rank", 0},
             {"pid", 10}}),
      Worker(9, "fail", 0, 0, 10, 2, "barrier",
             {{"error", {{"code", "broken"}, {"message", "a </script> <b>peer</b> died"}}}}),
      Ev(9, {{"type", "exit"}, {"job", 0}, {"rank", 0}, {"pid", 10}, {"exit_code", 1}}),
      Worker(10, "invoke", -1, -1, 12, 1, "clean", {{"args", Json::object()}}),
      Worker(11, "ok", -1, -1, 12, 1, "clean", {{"value", {{"removed", Json::array()}}}}),
      Ev(11, {{"type", "exit"}, {"job", -1}, {"rank", -1}, {"pid", 12}, {"exit_code", 0}}),
      Ev(12, {{"type", "trial"}, {"phase", "end"}, {"timed_out", false}}),
  };
}

harness::History History() {
  std::vector<std::string> errors;
  harness::TrialMeta meta;
  meta.jobs.push_back({});
  meta.jobs[0].ranks = 2;
  auto h = harness::build_history(Events(), meta, &errors);
  EXPECT_TRUE(errors.empty()) << errors.front();
  return h;
}

harness::TrialResult Trial() {
  harness::TrialResult t;
  t.scenario = "basic";
  t.trial = 3;
  t.seed = 42;
  t.run_seed = 7;
  t.verdict = harness::Verdict::kInvalid;
  t.reproduce = "shmstress run scenarios/basic.toml --seed 7 --trial 3";
  harness::CheckResult c;
  c.invariant = "cleanup.safety";
  c.verdict = harness::Verdict::kInvalid;
  c.problems = {
      "cleanup by job 0 rank 1 (pid 11) (+3.000ms to +4.000ms) removed /shmstress.000000_barrier "
      "while job 0 rank 0 "
      "(pid 10) (acquired +2.000ms, holding until +8.500ms) held prefix 0"};
  harness::CheckResult ok;
  ok.invariant = "prefix.unique";
  t.checks = {c, ok};
  return t;
}

std::vector<Json> Find(const Json& trace, const std::string& ph, const std::string& name) {
  std::vector<Json> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == ph && e["name"] == name) out.push_back(e);
  }
  return out;
}

TEST(Timeline, OneNamedThreadPerRankAndAFaultsTrack) {
  Json trace = timeline_trace(History(), Trial());
  std::map<int, std::string> names;
  for (const auto& e : Find(trace, "M", "thread_name")) names[e["tid"]] = e["args"]["name"];
  EXPECT_EQ(names[1], "faults");
  EXPECT_EQ(names[2], "job 0 rank 0 (pid 10)");
  EXPECT_EQ(names[3], "job 0 rank 1 (pid 11)");
  EXPECT_EQ(names[4], "cleanup (pid 12)");
  EXPECT_EQ(names.size(), 4u);
  EXPECT_EQ(Find(trace, "M", "process_name").at(0)["args"]["name"], "basic trial 3");
  EXPECT_EQ(trace["otherData"]["seed"], "42");
  EXPECT_EQ(trace["otherData"]["reproduce"],
            "shmstress run scenarios/basic.toml --seed 7 --trial 3");
  EXPECT_TRUE(trace["otherData"]["problems"].contains("cleanup.safety"));
  EXPECT_FALSE(trace["otherData"]["problems"].contains("prefix.unique"));
}

TEST(Timeline, OpsAreCompleteEventsInMicrosecondsFromTrialStart) {
  Json trace = timeline_trace(History(), Trial());
  auto acquire = Find(trace, "X", "acquire").at(0);
  EXPECT_EQ(acquire["tid"], 2);
  EXPECT_DOUBLE_EQ(acquire["ts"].get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ(acquire["dur"].get<double>(), 1000.0);
  EXPECT_EQ(acquire["args"]["outcome"], "ok");
  EXPECT_EQ(acquire["args"]["value"]["prefix"], 0);
  auto barrier = Find(trace, "X", "barrier").at(0);
  EXPECT_EQ(barrier["args"]["outcome"], "fail");
  EXPECT_EQ(barrier["args"]["error"]["code"], "broken");
  EXPECT_EQ(barrier["cname"], "bad");
}

TEST(Timeline, MarksTheOpsAProblemCites) {
  Json trace = timeline_trace(History(), Trial());
  auto cleans = Find(trace, "X", "clean");
  ASSERT_EQ(cleans.size(), 2u);
  const Json& bad = cleans[0]["tid"] == 3 ? cleans[0] : cleans[1];
  const Json& other = cleans[0]["tid"] == 3 ? cleans[1] : cleans[0];
  // The line cites the cleanup's start and end: that is the violating op.
  EXPECT_EQ(bad["args"]["violation"], true);
  EXPECT_EQ(bad["cname"], "terrible");
  EXPECT_NE(bad["args"]["violations"][0].get<std::string>().find(
                "cleanup.safety: cleanup by job 0 rank 1"),
            std::string::npos);
  EXPECT_FALSE(other["args"].contains("involved")) << "the cleanup worker is not named";
  // The holder's acquire completed at a cited time: context, not the violation.
  auto acquire = Find(trace, "X", "acquire").at(0);
  EXPECT_FALSE(acquire["args"].contains("violation"));
  EXPECT_EQ(acquire["args"]["cited"], true);
  EXPECT_EQ(acquire["cname"], "olive");
  // Its barrier is the named worker's but at no cited time: only involved.
  auto barrier = Find(trace, "X", "barrier").at(0);
  EXPECT_EQ(barrier["args"]["involved"], true);
  EXPECT_FALSE(barrier["args"].contains("violation"));
  EXPECT_FALSE(barrier["args"].contains("cited"));
  EXPECT_EQ(trace["otherData"]["violating_ops"], 1);
  int involved_lanes = 0;
  for (const auto& l : trace["otherData"]["lanes"]) involved_lanes += l["involved"].get<bool>();
  EXPECT_EQ(involved_lanes, 2);
}

// checks::describe names one op exactly; other wordings name workers by pid.
TEST(Timeline, DescribedOpAndPidOnlyMentions) {
  auto t = Trial();
  t.checks[0].invariant = "barrier.liveness";
  t.checks[0].problems = {
      "barrier of job 0 rank 0 (pid 10) invoked +5.000ms failed round 1 at +9.000ms (broken)"};
  Json trace = timeline_trace(History(), t);
  EXPECT_EQ(Find(trace, "X", "barrier").at(0)["args"]["violation"], true);
  EXPECT_FALSE(Find(trace, "X", "acquire").at(0)["args"].contains("violation"));
  EXPECT_EQ(trace["otherData"]["violating_ops"], 1);

  t.checks[0].invariant = "barrier.safety";
  t.checks[0].problems = {"job 0 round 1: rank 1 (pid 11) left at +4.000ms before rank 0 entered"};
  trace = timeline_trace(History(), t);
  auto cleans = Find(trace, "X", "clean");
  const Json& by11 = cleans[0]["args"]["pid"] == 11 ? cleans[0] : cleans[1];
  EXPECT_EQ(by11["args"]["violation"], true);  // the only op the line cites
  // "before rank 0 entered": rank 0 is part of the story, not the violation.
  auto acquire = Find(trace, "X", "acquire").at(0);
  EXPECT_EQ(acquire["args"].value("involved", false), true);
  EXPECT_FALSE(acquire["args"].contains("violation"));
}

TEST(Timeline, FaultsOnTheirTrackAndOnTheVictimsLane) {
  Json trace = timeline_trace(History(), Trial());
  int instants = 0, windows = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("cat", "") != "fault") continue;
    if (e["ph"] == "i") {
      ++instants;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 5000.0);
      EXPECT_TRUE(e["tid"] == 1 || e["tid"] == 3) << e.dump();
    } else {
      ++windows;
      EXPECT_EQ(e["ph"], "X");
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 2000.0);
      EXPECT_TRUE(e["tid"] == 1 || e["tid"] == 2) << e.dump();
    }
  }
  EXPECT_EQ(instants, 2);
  EXPECT_EQ(windows, 2);
  bool killed = false;
  for (const auto& e : trace["traceEvents"])
    killed |= e.value("cat", "") == "exit" && e["tid"] == 3 && e["args"]["signal"] == 9;
  EXPECT_TRUE(killed);
}

TEST(TimelineHtml, SelfContainedAndInjectionSafe) {
  Json trace = timeline_trace(History(), Trial());
  std::string html = timeline_html(trace);
  EXPECT_TRUE(html.starts_with("<!doctype html>"));
  EXPECT_NE(html.find("<script type=\"application/json\" id=\"trace\">"), std::string::npos);
  // The worker's error message cannot end the data element early...
  EXPECT_EQ(html.find("</script> <b>"), std::string::npos);
  EXPECT_NE(html.find("a \\u003c/script\\u003e \\u003cb\\u003epeer"), std::string::npos);
  // ...and nothing is fetched from anywhere.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  // The embedded data is the trace itself.
  auto begin = html.find("id=\"trace\">") + 11;
  auto end = html.find("</script>", begin);
  Json back = Json::parse(html.substr(begin, end - begin));
  EXPECT_EQ(back, trace);
}

TEST(Timeline, WriteTimelineReadsTheTrialDir) {
  char tmpl[] = "/tmp/shmstress-timeline-test.XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  {
    std::ofstream f(dir + "/history.jsonl");
    for (const auto& e : Events()) f << e.dump() << "\n";
  }
  auto t = Trial();
  t.dir = dir;
  harness::TrialMeta meta;
  meta.jobs.push_back({});
  meta.jobs[0].ranks = 2;
  std::string err;
  ASSERT_TRUE(write_timeline(t, meta, &err)) << err;
  std::ifstream j(dir + "/timeline.json");
  Json trace = Json::parse(j);
  EXPECT_EQ(trace["otherData"]["violating_ops"], 1);
  EXPECT_TRUE(fs::file_size(dir + "/timeline.html") > 1000);
  fs::remove_all(dir);
  t.dir = "/nonexistent/trial";
  EXPECT_FALSE(write_timeline(t, meta, &err));
}

}  // namespace
}  // namespace reports
