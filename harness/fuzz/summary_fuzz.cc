// libFuzzer target over a run's summary.json as every command reads it:
// through its one decoder (harness::parse_summary, summary.h), then each view
// of the record: the listed trials' reproduce commands (`report`, `replay`,
// `shrink`), the whole run (`merge`, `list --coverage`, `shrink`'s note:
// harness::run_result_of) and its buckets as a baseline (`baseline`,
// `--baseline`: harness::decode_baseline). A user may have edited, truncated or
// replaced it, or it came back from CI artifacts, so the decoder must answer
// with a record or an error naming the file: never an exception, a crash, a
// sanitizer report or an allocation the size of a number in the file.
//
// The input is the file, byte for byte. Beyond "does not crash", what the
// commands rely on is checked: a shard count merge can walk, counts that add
// up over every shard without passing 2^64, trial indices that are real ones,
// and a baseline that agrees with the record it was made from.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "check.h"
#include "known.h"
#include "summary.h"

namespace {

constexpr char kFile[] = "shard/summary.json";

void check_error(const harness::StoredError& err) {
  check(err.file == kFile, "an error names the file");
  check(!err.message.empty(), "an error says what is wrong");
  check(err.line >= 0, "an error's line is a line");
  check(err.where.empty() || err.where.starts_with("/") || err.where.starts_with("line "),
        "an error's place is a JSON pointer or a line");
  for (char c : err.to_string()) {
    check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f,
          "an error prints no control character");
  }
}

void check_run(const harness::RunResult& r) {
  check(r.shard_count >= 1 && r.shard_count <= harness::kMaxStoredShards,
        "the shard count is one merge can walk");
  check(r.shard_index >= 0 && r.shard_index < r.shard_count,
        "the shard index is one of the shards");
  check(r.tally.trials() <= harness::kMaxStoredCount, "the trial count is one a run reaches");
  check(r.planned >= -1 && r.planned <= static_cast<std::int64_t>(harness::kMaxStoredCount),
        "planned is -1 or a count");
  for (const auto& t : r.listed) check(t.trial >= 0, "a listed trial has a real index");
  // Every shard of a nightly at its largest still adds up without wrapping.
  harness::RunTally sum;
  sum.merge(r.tally);
  sum.merge(r.tally);
  check(sum.trials() == 2 * r.tally.trials(), "two shards' trials add up");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  harness::StoredError err;
  auto s = harness::parse_summary(text, kFile, &err);
  if (!s) {
    check_error(err);
    return 0;
  }
  check(!s->elapsed_s || *s->elapsed_s >= 0, "elapsed time is not negative");
  for (const auto& [dir, reproduce] : s->reproduce_by_dir())
    check(!dir.empty(), "a listed trial has a dir");
  if (auto r = harness::run_result_of(*s, &err)) {
    check_run(*r);
  } else {
    check_error(err);
  }
  // The same text as a baseline (it starts with '{' unless it has leading
  // whitespace, which decode_baseline skips too).
  harness::BaselineError berr;
  auto b = harness::decode_baseline(text, kFile, *harness::parse_day("2026-06-15"), &berr);
  if (!s->buckets) {
    check(!b.has_value(), "a summary without buckets is no baseline");
  } else if (b) {
    check(b->known.size() + b->expired.size() == s->buckets->size(), "every bucket is an entry");
    check(b->run_id == s->run_id.value_or("?"), "the baseline names the summary's run");
  } else {
    check(berr.to_string().starts_with(kFile), "a refused baseline names the file");
  }
  return 0;
}
