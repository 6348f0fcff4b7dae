// shmstress shrink TRIAL_DIR: delta debugging over a failing trial's scenario
// (harness/shrink.h) while the same invariant still fails; prints the minimal
// scenario and its reproduce command. The worker binary and isolation come
// from the run's reproduce command unless given.
#include "harness/shrink.h"

#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/cli.h"
#include "harness/summary.h"
#include "reports/reports.h"

namespace cli {
namespace {

// Marks the buckets in the run's summary.json as shrunk (the minimal file),
// and renders its report.html again. A trial dir outside a run is left be.
void note_shrunk(const fs::path& trial, const std::vector<harness::Fingerprint>& fps, const std::string& file) {
  std::error_code ec;
  fs::path run = fs::canonical(trial, ec);
  for (int up = 0; !ec && up < 3 && !fs::exists(run / "summary.json"); ++up) run = run.parent_path();
  if (ec || !fs::exists(run / "summary.json")) return;
  auto s = harness::load_summary((run / "summary.json").string(), nullptr);
  if (!s) return;  // not readable: nothing to note
  auto r = harness::run_result_of(*s, nullptr);
  if (!r) return;  // an older summary.json: nothing to note
  bool changed = false;
  for (const auto& f : fps) {
    auto& buckets = r->tally.buckets().buckets();
    if (auto it = buckets.find(f.id); it != buckets.end() && it->second.shrunk.empty()) {
      it->second.shrunk = file;
      changed = true;
    }
  }
  if (!changed) return;
  if (!reports::write_summary(*r, (run / "summary.json").string()) &&
      !reports::write_report_html(*r, (run / "report.html").string())) {
    std::printf("noted in %s/summary.json and report.html\n", run.c_str());
  }
}

struct ShrinkArgs {
  std::string dir, worker_bin, save;
  std::string subject;  // empty: the trial's own
  bool no_mount_ns = false;
  bool allow_stored_command = false;
  harness::ShrinkOptions so;
};

int shrink(ShrinkArgs a, const char* argv0) {
  const fs::path dir = a.dir;
  std::string err;
  const std::optional<TrialRunFlags> flags = trial_run_flags(dir, &err);
  if (!flags) {
    std::fprintf(stderr, "shmstress shrink: %s\n", err.c_str());
    return 2;
  }
  const TrialRunFlags& original = *flags;
  if (auto why = refuse_stored_command(original, !a.subject.empty(), !a.worker_bin.empty(), a.allow_stored_command)) {
    std::fprintf(stderr, "shmstress shrink: %s\n", why->c_str());
    return 2;
  }
  if (a.worker_bin.empty() && original.worker_bin) a.worker_bin = *original.worker_bin;
  a.no_mount_ns |= original.no_mount_ns;
  harness::ShrinkOptions& so = a.so;
  so.trial_dir = dir.string();
  so.run.exe = a.worker_bin.empty() ? default_worker_exe() : fs::absolute(a.worker_bin).string();
  so.run.allow_mount_ns = !a.no_mount_ns;
  so.run.invocation = argv0;
  so.run.parallel = 1;
  if (!a.worker_bin.empty()) so.run.reproduce_flags = " --worker-bin " + shell_word(a.worker_bin);
  if (a.no_mount_ns) so.run.reproduce_flags += " --no-mount-ns";
  follow_trial_run(original, &so.run);
  // Every candidate runs the subject the trial ran, not the scenario's own.
  const std::string subject = !a.subject.empty() ? a.subject : original.subject.value_or("");
  if (!subject.empty()) {
    std::string why;
    const std::vector<std::string> search_from =
        !a.subject.empty() || a.allow_stored_command ? std::vector<std::string>{dir.string()} : std::vector<std::string>{};
    if (!use_subject(subject, search_from, &so.run, &why)) {
      std::fprintf(stderr, "shmstress shrink: subject: %s\n", why.c_str());
      return 2;
    }
  }
  so.run.allow_shared_shm = original.allow_shared_shm;
  if (so.run.allow_shared_shm) so.run.reproduce_flags += " --allow-shared-shm";
  std::printf("shrinking %s (%d retries per candidate, budget %d)...\n", dir.c_str(), so.retries,
              so.budget);
  std::fflush(stdout);
  harness::ShrinkResult r = harness::shrink(so);
  if (!r.ok) {
    std::fprintf(stderr, "shmstress shrink: %s\n", r.error.c_str());
    return r.bad_input ? 2 : r.harness_failed ? 3 : 4;
  }
  std::printf(
      "%s still fails with %s\n  original: %s\n  minimal:  %s\n  (%d candidates tried, %d kept)\n"
      "minimal scenario: %s\nreproduce: %s\n",
      r.invariant.c_str(), r.minimal.to_string().c_str(), r.original.to_string().c_str(),
      r.minimal.to_string().c_str(), r.candidates, r.kept, r.minimal_file.c_str(),
      r.reproduce.c_str());
  // The buckets it stands for: in the run's summary.json (and report.html) from now on.
  const auto fps = harness::trial_fingerprints(dir.string(), r.invariant);
  for (const auto& f : fps) std::printf("fingerprint: %s\n", f.id.c_str());
  note_shrunk(dir, fps, r.minimal_file);
  if (!a.save.empty()) {
    auto saved = harness::save_regression(r, dir.string(), fps, a.save);
    if (!saved) {
      std::fprintf(stderr, "shmstress shrink: --save: %s\n", saved.error().c_str());
      return 3;
    }
    std::printf("regression scenario: %s\n", saved->c_str());
  }
  return 0;
}

}  // namespace

Subcommand add_shrink(CLI::App& app) {
  auto a = std::make_shared<ShrinkArgs>();
  auto* cmd =
      app.add_subcommand("shrink", "minimise a failing trial while the same invariant still fails");
  cmd->add_option("dir", a->dir, "a failing trial directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--invariant", a->so.invariant,
                  "the invariant to keep failing (default: the trial's first)");
  cmd->add_option("--retries", a->so.retries,
                  "re-runs per candidate before calling it passing (default 5)")
      ->check(integer_in(1, 1000));
  cmd->add_option("--budget", a->so.budget, "at most this many candidates (default 150)")
      ->check(integer_in(1, 100000));
  cmd->add_option("--worker-bin", a->worker_bin,
                  "native worker binary (default: the run's, else this one)");
  cmd->add_option("--subject", a->subject,
                  "subject every candidate runs (default: the one the trial ran)");
  cmd->add_flag("--no-mount-ns", a->no_mount_ns,
                "isolate trials by name root instead of a private /dev/shm");
  cmd->add_flag("--allow-stored-command", a->allow_stored_command,
                "run the exec: subject or --worker-bin the trial dir names (see `replay --help`)");
  cmd->add_option("--save", a->save,
                  "also write the minimal scenario into this dir as a regression scenario for the "
                  "catalog (named and described by its fingerprint)");
  return {cmd, [a](const char* argv0) { return shrink(*a, argv0); }};
}

}  // namespace cli
