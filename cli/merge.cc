// shmstress merge DIR...: the shards of one nightly (the run dirs of `run
// --shard i/n`, same seed) as one run: one summary.json, report.html and, if
// asked, JUnit XML and a metrics textfile, with counters added up and buckets
// merged by fingerprint. The shards must be complete and disjoint: the same
// seed, subject, shard count and scenarios, every index 0..n-1 exactly once,
// and every listed trial in its own shard's part of the seed space. Exit
// code: the merged run's (0/1/3/4, DESIGN.md §8), 2 if the shards do not add
// up (with what is wrong) or a summary.json cannot be read.
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>

#include "cli/cli.h"
#include "harness/baseline.h"
#include "reports/reports.h"

namespace cli {
namespace {

struct MergeArgs {
  std::vector<std::string> dirs;
  std::string out, junit, metrics, baseline;
  bool verbose = false;
};

struct Shard {
  fs::path dir;  // as given
  harness::RunResult r;
};

// A trial dir recorded on the machine that ran the shard, moved to where the
// shard's dir is now (a CI artifact is unpacked elsewhere).
std::string moved(const std::string& dir, const std::string& recorded_root, const fs::path& root) {
  if (dir.empty() || recorded_root.empty()) return dir;
  if (dir == recorded_root) return root.string();
  if (dir.rfind(recorded_root + "/", 0) == 0) return (root / dir.substr(recorded_root.size() + 1)).string();
  return dir;
}

std::set<std::string> scenario_names(const harness::RunResult& r) {
  std::set<std::string> out;
  for (const auto& [name, s] : r.tally.scenarios()) out.insert(name);
  return out;
}

std::string baseline_identity(const harness::Baseline* b) {
  if (!b) return "(none)";
  std::string s;
  for (const auto& [fp, k] : b->known) s += fp + " ";
  return s;
}

int merge(const MergeArgs& a) {
  auto bad = [](const std::string& msg) {
    std::fprintf(stderr, "shmstress merge: %s\n", harness::printable_text(msg).c_str());
    return 2;
  };
  std::vector<Shard> shards;
  for (const auto& d : a.dirs) {
    fs::path file;
    std::string why;
    auto r = read_run_result(d, &file, &why);
    if (!r) return bad(why);
    const fs::path root = fs::absolute(file.parent_path());
    // Trial dirs and example dirs as they are here.
    const std::string rec = r->out_dir;
    for (auto& t : r->listed) t.dir = moved(t.dir, rec, root);
    for (auto& [fp, b] : r->tally.buckets().buckets()) {
      b.example_dir = moved(b.example_dir, rec, root);
      // A shrink that ran since: its minimal scenario sits in the example's trial dir.
      if (b.shrunk.empty() && !b.example_dir.empty() && fs::exists(fs::path(b.example_dir) / "minimal.toml"))
        b.shrunk = (fs::path(b.example_dir) / "minimal.toml").string();
    }
    r->out_dir = root.string();
    shards.push_back(Shard{d, std::move(*r)});
  }
  // Complete and disjoint.
  const harness::RunResult& first = shards.front().r;
  const int n = first.shard_count;
  std::map<int, std::string> by_index;
  for (const auto& s : shards) {
    const auto& r = s.r;
    const std::string name = s.dir.string() + " (shard " + std::to_string(r.shard_index) + "/" +
                             std::to_string(r.shard_count) + ")";
    if (r.seed != first.seed)
      return bad(name + " ran with seed " + std::to_string(r.seed) + ", " + shards.front().dir.string() +
                 " with " + std::to_string(first.seed) + ": shards of one nightly share the seed");
    if (r.shard_count != n)
      return bad(name + " is one of " + std::to_string(r.shard_count) + " shards, " +
                 shards.front().dir.string() + " one of " + std::to_string(n));
    if (r.subject != first.subject)
      return bad(name + " ran subject " + r.subject + ", " + shards.front().dir.string() + " " + first.subject);
    if (scenario_names(r) != scenario_names(first))
      return bad(name + " ran other scenarios than " + shards.front().dir.string() + ": not the same nightly");
    if (auto [it, fresh] = by_index.emplace(r.shard_index, s.dir.string()); !fresh)
      return bad("shard " + std::to_string(r.shard_index) + "/" + std::to_string(n) + " is given twice: " +
                 it->second + " and " + s.dir.string());
    // Every trial it lists is in its own part of the seed space (indices i mod n).
    for (const auto& t : r.listed) {
      if (t.trial % n != r.shard_index)
        return bad(name + " lists " + t.scenario + " trial " + std::to_string(t.trial) +
                   ", which belongs to shard " + std::to_string(t.trial % n) + ": the shards overlap");
    }
    if (a.baseline.empty() &&
        baseline_identity(r.tally.buckets().baseline()) != baseline_identity(first.tally.buckets().baseline()))
      return bad(name + " was classified with another baseline than " + shards.front().dir.string() +
                 " (pass --baseline to classify them all alike)");
  }
  std::string missing;
  for (int i = 0; i < n; ++i) {
    if (!by_index.contains(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i) + "/" + std::to_string(n);
  }
  if (!missing.empty())
    return bad("incomplete: shard" + std::string(missing.find(',') != std::string::npos ? "s " : " ") + missing +
               " missing (" + std::to_string(shards.size()) + " of " + std::to_string(n) + " given)");

  // One run out of them.
  harness::RunResult m;
  m.seed = first.seed;
  m.subject = first.subject;
  m.run_id = first.run_id + "+merged-" + std::to_string(n);
  m.shard_index = 0;
  m.shard_count = 1;
  m.max_listed = 0;
  m.planned = 0;
  bool uncapped = false;
  for (const auto& s : shards) {
    const auto& r = s.r;
    m.tally.merge(r.tally);
    m.elapsed = std::max(m.elapsed, r.elapsed);
    m.interrupted |= r.interrupted;
    m.planned = m.planned < 0 || r.planned < 0 ? -1 : m.planned + r.planned;
    m.duration_s = std::max(m.duration_s, r.duration_s);
    for (const auto& [sc, states] : r.expect_reached) m.expect_reached[sc] = states;
    for (const auto& t : r.listed) m.listed.push_back(t);
    m.max_listed += r.max_listed;
    uncapped |= r.max_listed == 0;
  }
  if (uncapped) m.max_listed = 0;
  m.tally.buckets().set_baseline(first.tally.buckets().baseline_ptr());
  if (!a.baseline.empty()) {
    auto b = harness::load_baseline(a.baseline, harness::today_utc());
    if (!b) return bad("--baseline " + b.error().to_string());
    m.tally.reclassify(std::make_shared<const harness::Baseline>(std::move(*b)));
  }
  m.out_dir = a.out.empty() ? fs::absolute("merged").string() : fs::absolute(a.out).string();
  // The merged summary.json must not take a shard's place.
  for (const auto& s : shards) {
    if (canonical_or(m.out_dir) == canonical_or(s.r.out_dir))
      return bad("--out " + m.out_dir + " is the run dir of shard " + s.dir.string() +
                 ": the merged summary.json would replace the shard's (give another --out)");
  }
  if (auto e = check_user_outputs({a.junit, a.metrics})) return bad(e->message);
  std::error_code ec;
  fs::create_directories(m.out_dir, ec);
  m.out_dir = canonical_or(m.out_dir);
  std::string why;
  int lock_rc = 0;
  const auto out_lock = RunDirLock::take(m.out_dir, &why, &lock_rc);
  if (!out_lock) {
    std::fprintf(stderr, "shmstress merge: --out %s: %s\n", m.out_dir.c_str(), why.c_str());
    return lock_rc;
  }

  reports::console_summary(stdout, m, stdout_color(), a.verbose);
  const int rc = m.tally.trials() == 0 ? 3 : m.exit_code();
  const std::string summary = m.out_dir + "/summary.json";
  int failed = 0;
  std::printf("merged %zu shards: %llu trials, seed %llu\n", shards.size(),
              static_cast<unsigned long long>(m.tally.trials()), static_cast<unsigned long long>(m.seed));
  if (report_written(reports::write_summary(m, summary), "summary.json", &failed))
    std::printf("summary: %s\n", summary.c_str());
  if (report_written(reports::write_report_html(m, m.out_dir + "/report.html"), "report.html", &failed))
    std::printf("report: %s/report.html\n", m.out_dir.c_str());
  if (int ci = write_ci_reports(m, rc, a.junit, a.metrics); failed == 0) failed = ci;
  return failed != 0 ? failed : rc;
}

}  // namespace

Subcommand add_merge(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  auto* cmd = app.add_subcommand(
      "merge", "combine the run dirs of a nightly's shards (same seed) into one report");
  cmd->add_option("dirs", a->dirs, "the shards' run dirs (or their summary.json)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--out", a->out, "where the merged summary.json and report.html go (default ./merged)");
  cmd->add_option("--junit", a->junit, "also write the merged JUnit XML here");
  cmd->add_flag("-v,--verbose", a->verbose, "one line per scenario: trials, violations, expected states reached, faults injected");
  cmd->add_option("--metrics-file", a->metrics, "also write a Prometheus textfile of the merged run here");
  cmd->add_option("--baseline", a->baseline,
                  "classify the buckets against this baseline (default: as the shards did)")
      ->check(CLI::ExistingFile);
  return {cmd, [a](const char*) { return merge(*a); }};
}

}  // namespace cli
