// A run read back from its summary.json (what `merge` adds up, what `shrink`
// notes its result in): counters, buckets, the baseline they were classified
// with, the listed failing trials. An error names the key that is missing or
// wrong, and a count or index that would overflow when shards are added up
// (merge) is refused, never wrapped. No <expected>: the clang 14 fuzz build
// (harness/fuzz/stored_fuzz.cc) decodes summaries with it.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/results.h"

namespace reports {

// nullopt with *err naming the key ("tally.totals.trials = ... is past any
// run's count") if `j` is not a summary.json this shmstress can add up.
std::optional<harness::RunResult> read_summary(const nlohmann::json& j, std::string* err);

}  // namespace reports
