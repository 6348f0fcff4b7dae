// A run's summary.json (reports/summary_json.cc writes it), decoded once into
// one typed record that every reader of it takes from: `report`, `replay` and
// `shrink` (the listed trials' reproduce commands), `merge`, `list --coverage`
// and `shrink`'s note of its result (the whole run, run_result_of), and
// `baseline` / `--baseline` (its buckets, baseline.h).
//
// The run wrote it, but by the time it is read anyone may have edited,
// truncated or replaced it, or it came back from another machine's CI
// artifacts. Every value present is checked here, once, for the type and range
// the run writes: a count is at most kMaxStoredCount (so merge adds up 100000
// shards of them without passing 2^64), a trial index fits an int, a shard is
// i/n, a sketch is one QuantileSketch could have saved. A file that does not
// fit is a StoredError naming the file and the JSON pointer (and, inside
// "buckets", the line: a summary.json is a baseline too, and baselines name
// lines), never an exception.
//
// What may be absent: the parts that `report` and `baseline` read (run id,
// subject, elapsed time, the listed trials, the buckets) may lack any key a
// command does not need, as an older shmstress or a hand-made file leaves
// them; the command that needs a key says so ("is missing", run_result_of).
// The parts only `merge` reads ("tally", "baseline", "skipped",
// "harness_errors", "history_errors") are whole or refused. Keys no command
// uses are ignored (a newer harness may add some).
//
// No <expected>: the clang 14 fuzz build (harness/fuzz/summary_fuzz.cc)
// compiles it.
//
// Process contract: plain values in the harness process.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "known.h"
#include "results.h"
#include "stored.h"

namespace harness {

// A shard count past any nightly's (run --shard's limit).
inline constexpr int kMaxStoredShards = 100000;

// One failing trial as "violations" or "unknown" lists it (one per check).
struct StoredFailure {
  std::optional<std::string> invariant, scenario;
  std::optional<int> trial;  // >= 0
  std::optional<std::uint64_t> seed, run_seed;
  std::optional<std::string> trial_dir;  // "": past --max-kept, its dir was not kept
  std::optional<std::string> reproduce;
  std::optional<std::vector<std::string>> problems;
};

// One bucket (triage.h) of "buckets".
struct StoredBucket {
  std::string fingerprint;    // always there: a bucket is its fingerprint (not checked
                              // against triage's form: baseline.h does that)
  int line = 1;               // of its "fingerprint" key in the file
  std::optional<bool> known;  // "status": "known" (true) or "new"
  std::optional<std::string> invariant, scenario, shape, problem, trial_dir, reproduce, shrunk;
  std::optional<std::uint64_t> trials;                        // a count
  std::optional<int> first_trial, last_trial, example_trial;  // >= 0
  std::optional<std::uint64_t> example_seed;
  std::optional<std::string> known_reason;  // not blank: a baseline line must have a reason
  std::optional<Day> known_expires;         // none (or null): never
};

// The run's failing trials it could not judge, each as a whole.
struct StoredSkipped {  // "skipped": the subject could not run
  std::string scenario;
  int trial = 0;
  std::string reason;
};
struct StoredHarnessError {  // "harness_errors"
  std::string scenario;
  int trial = 0;
  std::string message, trial_dir;
};
struct StoredHistoryErrors {  // "history_errors": events that did not fit the protocol
  std::string scenario;
  int trial = 0;
  std::uint64_t count = 0;  // a count
  std::vector<std::string> errors;
  std::string trial_dir, reproduce;
};

// The baseline the run classified its buckets with ("baseline").
struct StoredBaseline {
  std::string file;
  std::vector<KnownFailure> entries, expired;
};

// The run's counters as it kept them ("tally"): what merge adds up. Every
// count is at most kMaxStoredCount; the sketches are consistent.
struct StoredTally {
  RunTally::Totals totals;
  std::map<std::string, ScenarioTally> scenarios;
  QuantileSketch acquire, barrier, recovery;
  std::uint64_t buckets_overflow = 0;
  std::vector<std::string> known_seen;
};

struct StoredShard {
  int index = 0, count = 1;  // 0 <= index < count <= kMaxStoredShards
};

struct StoredSummary {
  std::string file;  // where it was read from (errors name it)
  std::optional<std::string> run_id, subject;
  std::optional<double> elapsed_s;  // >= 0
  std::optional<std::uint64_t> seed;
  std::optional<bool> interrupted;
  std::optional<StoredShard> shard;
  std::optional<std::string> out_dir;
  std::optional<std::uint64_t> max_kept;  // a count
  std::optional<std::int64_t> planned;    // -1 (a --duration soak) or a count
  std::optional<double> duration_s;       // >= 0
  std::map<std::string, std::vector<std::string>> expect_reached;
  std::optional<RunResult::Concurrency> concurrency;
  std::optional<StoredBaseline> baseline;  // none (or null): the run had none
  std::optional<StoredTally> tally;        // none: written before `merge` existed
  std::vector<StoredFailure> violations, unknown;
  std::optional<std::vector<StoredBucket>> buckets;  // none: not a baseline
  std::vector<StoredSkipped> skipped;
  std::vector<StoredHarnessError> harness_errors;
  std::vector<StoredHistoryErrors> history_errors;

  // The listed trials whose dirs were kept, by dir: their reproduce commands
  // (what `report`, `replay` and `shrink` look a trial up by).
  std::map<std::string, std::string> reproduce_by_dir() const;
};

// Decodes summary.json's text (`file` names it in errors).
std::optional<StoredSummary> parse_summary(std::string_view text, const std::string& file,
                                           StoredError* err);
// The same, reading the file first (a regular file of at most
// kMaxUserFileBytes, files.h).
std::optional<StoredSummary> load_summary(const std::string& path, StoredError* err);

// The run the summary is of, as `merge` adds it up and `shrink` writes it back:
// every counter, bucket and listed failing trial. Needs every key the run
// writes ("is missing" names the first absent one; a file without "tally" was
// written before `merge` existed).
std::optional<RunResult> run_result_of(const StoredSummary& s, StoredError* err);

}  // namespace harness
