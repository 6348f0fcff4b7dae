// libFuzzer target over a trial's history.jsonl as the check path reads it.
// Workers write it (a subject may write any bytes on fd 3, be killed in the
// middle of a line, or be a program that does not speak the protocol at all),
// so check_trial_dir must answer every input with history errors and a
// verdict: never a crash, a hang or a sanitizer report. The input is the file,
// byte for byte, so the seeds are real history.jsonl files from trial dirs.
//
// Then the timeline `report` draws of it (reports/timeline.cc). Beyond "does
// not crash", what `run`, `check` and `report` rely on is checked:
// every check names a registered invariant, the trial's verdict is at least as
// bad as each check's, and the verdict.json it writes decodes with the same
// decoder the offline commands use (stored.h).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/checker.h"
#include "harness/fuzz/check.h"
#include "harness/history.h"
#include "harness/run.h"
#include "harness/scenario.h"
#include "harness/stored.h"
#include "reports/reports.h"

namespace {

// The topology the events are checked against: three jobs of two ranks, as in
// the seeds (kill-holder, basic, ...), so job and rank numbers mostly fit.
constexpr char kScenario[] = R"(name = "fuzz"
[[job]]
count = 3
ranks = 2
dirs = ["/data/{job}"]
remote = true
[job.workload]
rounds = 3
segments = ["shard_states"]
clean_before = true
clean_after = true
)";

const harness::Scenario& scenario() {
  static const harness::Scenario s = [] {
    harness::ScenarioError err;
    auto parsed = harness::parse_scenario(kScenario, "fuzz.toml", &err);
    check(parsed.has_value(), "the fuzz scenario parses");
    return *parsed;
  }();
  return s;
}

// One scratch dir for the whole fuzzing process, removed when it exits.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    path = (std::filesystem::temp_directory_path() / "history-fuzz-XXXXXX").string();
    check(::mkdtemp(path.data()) != nullptr, "mkdtemp");
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::string& trial_dir() {
  static const ScratchDir dir;
  return dir.path;
}

bool registered(const std::string& invariant) {
  for (const auto& c : harness::checker_registry()) {
    if (c.invariant == invariant) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& dir = trial_dir();
  {
    std::FILE* f = std::fopen((dir + "/history.jsonl").c_str(), "wb");
    check(f != nullptr, "open history.jsonl");
    check(std::fwrite(data, 1, size, f) == size, "write history.jsonl");
    std::fclose(f);
  }
  std::remove((dir + "/verdict.json").c_str());
  const harness::TrialResult t = harness::check_trial_dir(scenario(), dir, 0, 1, 2);
  for (const auto& c : t.checks) {
    check(registered(c.invariant), "every check names a registered invariant");
    check(harness::compose(t.verdict, c.verdict) == t.verdict,
          "the trial's verdict is at least as bad as each check's");
  }
  harness::StoredError err;
  const auto stored = harness::load_verdict(dir + "/verdict.json", &err);
  if (!stored) std::fprintf(stderr, "%s\n", err.to_string().c_str());
  check(stored.has_value(), "verdict.json decodes with the offline commands' decoder");
  check(stored->verdict == t.verdict, "verdict.json says the trial's verdict");
  check(stored->checks.size() == t.checks.size(), "verdict.json lists every check");
  // `report` then draws the trial's timeline from the same history.
  std::vector<std::string> errors;
  const auto events = harness::parse_jsonl(
      std::string(reinterpret_cast<const char*>(data), size), &errors);
  const harness::History h = harness::build_history(events, harness::meta_for(scenario(), 2), &errors);
  const nlohmann::json trace = reports::timeline_trace(h, t);
  check(trace.contains("traceEvents"), "the timeline has its events");
  check(!reports::timeline_html(trace).empty(), "the timeline page is drawn");
  return 0;
}
