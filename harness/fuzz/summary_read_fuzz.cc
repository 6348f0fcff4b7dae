// libFuzzer target over a shard's summary.json as `merge` (and `shrink`'s
// note of its result) decodes it: harness::parse_json_object, then
// reports::read_summary into a RunResult. Shards come back from CI artifacts a
// user may have edited, truncated or replaced, so the decoder must answer with
// a run or an error naming the key: never an exception, a crash, a sanitizer
// report or an allocation the size of a number in the file.
//
// The input is the file, byte for byte. Beyond "does not crash", what merge
// relies on is checked: a shard count merge can iterate over, counts that add
// up over every shard without passing 2^64, trial indices that are real ones.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "reports/summary_read.h"
#include "stored.h"
#include "check.h"

namespace {

constexpr char kFile[] = "shard/summary.json";
// summary_read.cc's limits: at most 100000 shards of at most 2^40 each.
constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 40;
constexpr int kMaxShards = 100000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  harness::StoredError err;
  auto j = harness::parse_json_object(text, kFile, &err);
  if (!j) {
    check(err.file == kFile, "a JSON error names the file");
    check(!err.message.empty(), "a JSON error says what is wrong");
    return 0;
  }
  std::string why;
  auto r = reports::read_summary(*j, &why);
  if (!r) {
    check(!why.empty(), "a refused summary says which key is wrong");
    return 0;
  }
  check(r->shard_count >= 1 && r->shard_count <= kMaxShards, "the shard count is one merge can walk");
  check(r->shard_index >= 0 && r->shard_index < r->shard_count, "the shard index is one of the shards");
  check(r->tally.trials() <= kMaxCount, "the trial count is one a run reaches");
  check(r->planned >= -1 && r->planned <= static_cast<std::int64_t>(kMaxCount), "planned is -1 or a count");
  for (const auto& t : r->listed) check(t.trial >= 0, "a listed trial has a real index");
  // Every shard of a nightly at its largest still adds up without wrapping.
  harness::RunTally sum;
  sum.merge(r->tally);
  sum.merge(r->tally);
  check(sum.trials() == 2 * r->tally.trials(), "two shards' trials add up");
  return 0;
}
