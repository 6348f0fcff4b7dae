// libFuzzer target over a stored trial's files as the offline commands
// (check, report, replay, shrink) decode them: schedule.json and verdict.json
// (stored.h; summary.json is summary_fuzz's). A user may have edited,
// truncated or replaced any of them, so each decoder must answer with a record
// or an error naming the file: never an exception, a crash or a sanitizer
// report.
//
// The first input byte selects the decoder (modulo the count); the rest is the
// file. Beyond "does not crash", what the callers rely on is checked.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "scenario.h"
#include "stored.h"
#include "check.h"

namespace {

enum Decoder : std::uint8_t { kSchedule, kVerdict, kDecoderCount };

constexpr char kFile[] = "run/trial-0/stored.json";

void check_error(const harness::StoredError& err) {
  check(err.file == kFile, "an error names the file");
  check(!err.message.empty(), "an error says what is wrong");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  harness::StoredError err;
  switch (data[0] % kDecoderCount) {
    case kSchedule: {
      auto s = harness::parse_schedule(text, kFile, &err);
      if (!s) return check_error(err), 0;
      check(s->trial >= 0, "the trial index is not negative");
      std::string why;
      // It names the trial's dir under the run dir: it must not leave it.
      check(!s->scenario || harness::valid_scenario_name(*s->scenario, &why),
            "the scenario name is a valid one");
      check(!s->scenario_file || !s->scenario_file->empty(), "a scenario file is a path");
      break;
    }
    case kVerdict: {
      auto v = harness::parse_verdict(text, kFile, &err);
      if (!v) return check_error(err), 0;
      for (const auto& c : v->checks) check(!c.invariant.empty(), "a check names its invariant");
      break;
    }
  }
  return 0;
}
