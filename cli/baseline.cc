// shmstress baseline RUN...: writes a baseline file (harness/baseline.h) from
// the buckets of one or more runs (their summary.json: a run dir, a merged
// dir, or the shards of one nightly). Entries already in the output file keep
// their reasons and expiries, and stay unless --prune; new ones get --reason
// and --expires (default: "known since run <id>", never). Exit codes: 0
// written, 2 bad input (file:line), 3 it cannot be written.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "cli/cli.h"
#include "harness/baseline.h"
#include "reports/reports.h"

namespace cli {
namespace {

struct BaselineArgs {
  std::vector<std::string> runs;
  std::string out, reason, expires = "never";
  bool prune = false;
};

int baseline(const BaselineArgs& a) {
  const harness::Day today = harness::today_utc();
  // The file keeps a reason per line; a blank one would be written and then
  // refused by every `run --baseline` ("no reason"): refused here instead.
  if (!a.reason.empty() && a.reason.find_first_not_of(" \t\r\n\v\f") == std::string::npos) {
    std::fprintf(stderr, "shmstress baseline: --reason is blank: say why these failures are known\n");
    return 2;
  }
  std::optional<harness::Day> expires;
  if (a.expires != "never") {
    expires = harness::parse_day(a.expires);
    if (!expires) {
      std::fprintf(stderr, "shmstress baseline: --expires '%s': expected YYYY-MM-DD or never\n",
                   a.expires.c_str());
      return 2;
    }
  }
  if (!a.out.empty()) {
    if (auto e = harness::check_output(a.out, harness::OutputOrigin::kUser)) {
      std::fprintf(stderr, "shmstress baseline: -o %s\n", e->message.c_str());
      return e->exit_code;
    }
  }
  // What the output file already says: kept, with its reasons.
  std::vector<harness::KnownFailure> entries;
  std::vector<std::string> notes;
  std::map<std::string, std::size_t> at;
  // Only a regular file holds entries; /dev/stdout, a FIFO or /dev/null is
  // only written to (harness::write_output decides what may be).
  std::error_code reg_ec;
  if (!a.out.empty() && fs::is_regular_file(a.out, reg_ec)) {
    auto old = harness::load_baseline(a.out, harness::Day{0});  // expired entries are kept too
    if (!old) {
      std::fprintf(stderr, "shmstress baseline: %s\n", old.error().to_string().c_str());
      return 2;
    }
    std::vector<harness::KnownFailure> all;
    for (auto& [fp, k] : old->known) all.push_back(k);
    std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.line < y.line; });
    for (auto& k : all) {
      at[k.fingerprint] = entries.size();
      entries.push_back(std::move(k));
      notes.emplace_back();
    }
  }
  std::set<std::string> seen;
  std::size_t added = 0;
  for (const auto& run : a.runs) {
    const fs::path p = fs::is_directory(run) ? fs::path(run) / "summary.json" : fs::path(run);
    auto b = harness::load_baseline(p.string(), today);  // a summary.json is a baseline too
    if (!b) {
      std::fprintf(stderr, "shmstress baseline: %s\n", b.error().to_string().c_str());
      return 2;
    }
    std::vector<harness::KnownFailure> these;
    for (auto& [fp, k] : b->known) these.push_back(k);
    for (auto& k : b->expired) these.push_back(k);
    std::sort(these.begin(), these.end(), [](const auto& x, const auto& y) { return x.line < y.line; });
    for (auto& k : these) {
      seen.insert(k.fingerprint);
      if (at.contains(k.fingerprint)) continue;
      if (!k.known_in_run) {
        k.reason = a.reason.empty() ? "known since run " + b->run_id : a.reason;
        k.expires = expires;
      }
      std::string note = std::move(k.note);
      at[k.fingerprint] = entries.size();
      entries.push_back(std::move(k));
      notes.push_back(std::move(note));
      ++added;
    }
  }
  std::size_t pruned = 0;
  if (a.prune) {
    std::vector<harness::KnownFailure> kept;
    std::vector<std::string> kept_notes;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (!seen.contains(entries[i].fingerprint)) {
        ++pruned;
        continue;
      }
      kept.push_back(entries[i]);
      kept_notes.push_back(notes[i]);
    }
    entries.swap(kept);
    notes.swap(kept_notes);
  }
  const std::string text = harness::baseline_text(entries, notes);
  // What is written is what `run --baseline` reads: a file it would refuse
  // (a reason a run's summary.json carried that is blank) is not written.
  if (auto back = harness::parse_baseline(text, a.out.empty() ? "<stdout>" : a.out, harness::Day{0}); !back) {
    std::fprintf(stderr, "shmstress baseline: not written, `run --baseline` would refuse it: %s\n",
                 harness::printable_text(back.error().to_string()).c_str());
    return 2;
  }
  if (a.out.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    if (fs::path(a.out).has_parent_path()) {
      std::error_code ec;
      fs::create_directories(fs::path(a.out).parent_path(), ec);
    }
    if (auto e = harness::write_output(a.out, text, harness::OutputOrigin::kUser)) {
      std::fprintf(stderr, "shmstress baseline: cannot write %s\n", e->message.c_str());
      return e->exit_code;
    }
  }
  std::fprintf(stderr, "baseline: %zu entries (%zu new%s)%s%s\n", entries.size(), added,
               a.prune ? (", " + std::to_string(pruned) + " pruned").c_str() : "",
               a.out.empty() ? "" : " in ", a.out.c_str());
  return 0;
}

}  // namespace

Subcommand add_baseline(CLI::App& app) {
  auto a = std::make_shared<BaselineArgs>();
  auto* cmd = app.add_subcommand(
      "baseline", "write a baseline of known failures from the buckets of one or more runs");
  cmd->add_option("runs", a->runs, "run dirs (or their summary.json): a run, a merge, or shards")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("-o,--out", a->out,
                  "the baseline file (default stdout); entries it has keep their reasons");
  cmd->add_option("--reason", a->reason, "reason for the new entries (default: known since run <id>)");
  cmd->add_option("--expires", a->expires, "expiry of the new entries: YYYY-MM-DD or never (default)");
  cmd->add_flag("--prune", a->prune, "drop entries of --out that none of the runs saw");
  return {cmd, [a](const char*) { return baseline(*a); }};
}

}  // namespace cli
