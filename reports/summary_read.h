// A run read back from its summary.json (what `merge` adds up, what `shrink`
// notes its result in): counters, buckets, the baseline they were classified
// with, the listed failing trials. An error names the key that is missing or
// wrong. Apart from reports.h because of <expected>, which the clang 14 fuzz
// build of reports/replay.cc and reports/timeline.cc cannot compile.
#pragma once

#include <expected>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/results.h"

namespace reports {

std::expected<harness::RunResult, std::string> read_summary(const nlohmann::json& j);

}  // namespace reports
