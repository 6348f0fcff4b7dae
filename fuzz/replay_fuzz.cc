// libFuzzer target over what `replay` and `shrink` take from a stored run
// through reports/replay.cc, after harness/ decoded it: the invariants a
// trial's verdict.json names as the ones to replay (reports::replay_targets),
// and the flags of summary.json's reproduce commands, which they split into
// shell words to find --worker-bin, --subject and --no-mount-ns
// (reports::command_flag). Both are bytes someone else wrote: never a crash,
// a hang or a sanitizer report.
//
// The first input byte selects the file (verdict.json, summary.json); the
// rest is the file. Beyond "does not crash", what replay relies on is checked.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "harness/fuzz/check.h"
#include "harness/stored.h"
#include "harness/summary.h"
#include "reports/reports.h"

namespace {

enum File : std::uint8_t { kVerdict, kSummary, kFileCount };

constexpr char kFile[] = "run/stored.json";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  harness::StoredError err;
  switch (data[0] % kFileCount) {
    case kVerdict: {
      auto v = harness::parse_verdict(text, kFile, &err);
      if (!v) return 0;
      for (const auto& target : reports::replay_targets(*v)) {
        check(std::any_of(v->checks.begin(), v->checks.end(),
                          [&](const harness::StoredCheck& c) {
                            return c.invariant == target && !c.excused &&
                                   c.verdict != harness::Verdict::kValid;
                          }),
              "a replay target is a check that was not valid and not excused");
      }
      break;
    }
    case kSummary: {
      auto s = harness::parse_summary(text, kFile, &err);
      if (!s) return 0;
      for (const auto& [dir, reproduce] : s->reproduce_by_dir()) {
        for (const char* flag : {"--worker-bin", "--subject", "--no-mount-ns"}) {
          if (auto value = reports::command_flag(reproduce, flag)) {
            check(value->size() <= reproduce.size(), "a flag's value comes from its command");
          }
        }
      }
      break;
    }
  }
  return 0;
}
