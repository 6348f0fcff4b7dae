// libFuzzer target over a scenario file through the whole validator that
// `run`, `replay` and `shrink` use before anything runs (load_and_validate:
// the file read, TOML, keys, types, ranges, invariants and reached states,
// fault kinds and every injector's parameters, the subject), and, for a file
// it accepts, the planning every trial of it does (run.cc): an accepted
// scenario must plan without an error, and its schedule.json must decode with
// the offline commands' decoder. A refused one must say so naming the file
// (exit 2 with file:line). Never a crash, a hang or a sanitizer report.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "injector.h"
#include "plan.h"
#include "run.h"
#include "scenario.h"
#include "stored.h"
#include "check.h"

namespace {

// One scratch dir for the whole fuzzing process, removed when it exits.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    path = (std::filesystem::temp_directory_path() / "scenario-fuzz-XXXXXX").string();
    check(::mkdtemp(path.data()) != nullptr, "mkdtemp");
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::string& scratch() {
  static const ScratchDir dir;
  return dir.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string file = scratch() + "/fuzz.toml";
  {
    std::FILE* f = std::fopen(file.c_str(), "wb");
    check(f != nullptr, "open the scenario file");
    check(std::fwrite(data, 1, size, f) == size, "write the scenario file");
    std::fclose(f);
  }
  std::vector<harness::Scenario> scenarios;
  std::string err;
  if (!harness::load_and_validate({file}, &scenarios, &err)) {
    check(err.rfind(file, 0) == 0, "a refused scenario's error names the file");
    return 0;
  }
  check(scenarios.size() == 1, "one file, one scenario");
  const harness::Scenario& s = scenarios.front();
  // As run.cc plans each trial it starts (trial 0 and a later one).
  for (int trial : {0, 7}) {
    harness::TrialPlan plan = harness::base_plan(s, 42, trial);
    harness::Rng rng(plan.seed);
    for (const auto& f : s.faults) {
      const harness::InjectorInfo* inj = harness::find_injector(f.kind);
      check(inj != nullptr, "an accepted fault kind is registered");
      check(!inj->plan(f, s, rng, plan).has_value(), "an accepted fault plans every trial");
    }
    std::stable_sort(plan.actions.begin(), plan.actions.end(),
                     [](const harness::Action& a, const harness::Action& b) {
                       return a.at_ns < b.at_ns;
                     });
    harness::StoredError stored_err;
    const auto back =
        harness::parse_schedule(harness::to_json(plan).dump(2), "schedule.json", &stored_err);
    if (!back) std::fprintf(stderr, "%s\n", stored_err.to_string().c_str());
    check(back.has_value(), "the schedule.json of an accepted scenario decodes");
    check(back->trial == trial && back->run_seed == 42, "schedule.json says which trial");
  }
  return 0;
}
