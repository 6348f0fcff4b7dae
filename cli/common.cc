#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "cli/cli.h"
#include "harness/run.h"
#include "harness/subjects.h"
#include "reports/reports.h"

namespace cli {

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "shmstress" : p.string();
}

std::string canonical_or(const fs::path& p) {
  std::error_code ec;
  auto c = fs::canonical(p, ec);
  return ec ? p.string() : c.string();
}

bool stdout_color() { return ::isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR"); }

harness::TrialResult recheck_trial(const fs::path& t, std::optional<harness::Scenario>* s,
                                   std::string* err) {
  harness::ScenarioError e;
  *s = harness::load_scenario((t / "scenario.toml").string(), &e);
  if (!*s) {
    *err = e.to_string();
    return {};
  }
  nlohmann::json sched = nlohmann::json::parse(std::ifstream(t / "schedule.json"), nullptr, false);
  if (!sched.is_object()) sched = nlohmann::json::object();
  (*s)->name = sched.value("scenario", (*s)->name);
  (*s)->file = sched.value("scenario_file", (*s)->file);
  return harness::check_trial_dir(**s, t.string(), sched.value("trial", 0),
                                  sched.value("run_seed", 0ULL), sched.value("seed", 0ULL));
}

std::vector<fs::path> find_trial_dirs(const std::string& dir) {
  std::vector<fs::path> trials;
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "history.jsonl") && fs::exists(fs::path(dir) / "scenario.toml"))
    trials.push_back(dir);
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_directory()) continue;
    if (it->path().filename() == "replays") {
      it.disable_recursion_pending();
      continue;
    }
    if (fs::exists(it->path() / "history.jsonl") && fs::exists(it->path() / "scenario.toml"))
      trials.push_back(it->path());
  }
  std::sort(trials.begin(), trials.end());
  return trials;
}

nlohmann::json find_run_summary(const fs::path& dir) {
  std::error_code ec;
  fs::path p = fs::canonical(dir, ec);
  for (int up = 0; !ec && up < 3 && !p.empty(); ++up, p = p.parent_path()) {
    if (fs::exists(p / "summary.json")) {
      nlohmann::json j = nlohmann::json::parse(std::ifstream(p / "summary.json"), nullptr, false);
      if (j.is_object()) return j;
    }
    if (p == p.parent_path()) break;
  }
  return nullptr;
}

std::map<std::string, std::string> reproduce_commands(const nlohmann::json& summary) {
  std::map<std::string, std::string> out;
  if (!summary.is_object()) return out;
  for (const char* key : {"violations", "unknown"}) {
    if (!summary.contains(key) || !summary[key].is_array()) continue;
    for (const auto& v : summary[key]) {
      if (v.is_object() && v.contains("trial_dir") && v.contains("reproduce")) {
        out[v.value("trial_dir", "")] = v.value("reproduce", "");
      }
    }
  }
  return out;
}

TrialRunFlags trial_run_flags(const fs::path& trial_dir) {
  TrialRunFlags f;
  auto repro = reproduce_commands(find_run_summary(trial_dir));
  if (auto it = repro.find(trial_dir.string()); it != repro.end()) {
    f.worker_bin = reports::command_flag(it->second, "--worker-bin");
    f.subject = reports::command_flag(it->second, "--subject");
    f.no_mount_ns = (" " + it->second + " ").find(" --no-mount-ns ") != std::string::npos;
    f.allow_shared_shm = (" " + it->second + " ").find(" --allow-shared-shm ") != std::string::npos;
  }
  // The trial's own record wins: it is there for passing trials too, which
  // have no reproduce command, and it names a scenario's own subject.
  nlohmann::json sched =
      nlohmann::json::parse(std::ifstream(trial_dir / "schedule.json"), nullptr, false);
  if (sched.is_object() && sched.contains("subject") && sched["subject"].is_string() &&
      !sched["subject"].get<std::string>().empty()) {
    f.subject = sched["subject"].get<std::string>();
  }
  return f;
}

std::string shell_word(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t\n'\"$\\`;&|<>()*?[]#~!{}") == std::string::npos) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool use_subject(const std::string& spec, const std::vector<std::string>& search_from,
                 harness::RunOptions* o, std::string* why) {
  auto subj = harness::resolve_subject(spec, search_from, why);
  if (!subj) return false;
  o->subject = spec;
  o->subject_explicit = true;
  o->subject_command = subj->command;
  o->subject_root = subj->shm_root;
  o->reproduce_flags += " --subject " + shell_word(spec);
  return true;
}

bool write_timeline(const harness::TrialResult& t, const harness::Scenario& s) {
  std::string err;
  if (!reports::write_timeline(t, harness::meta_for(s, t.seed), &err)) {
    std::fprintf(stderr, "shmstress: no timeline for %s: %s\n", t.dir.c_str(), err.c_str());
    return false;
  }
  return true;
}

bool write_ci_reports(const harness::RunResult& r, int rc, const std::string& junit,
                      const std::string& metrics) {
  std::error_code ec;
  std::string err;
  if (!junit.empty()) {
    if (fs::path(junit).has_parent_path())
      fs::create_directories(fs::path(junit).parent_path(), ec);
    if (!reports::write_file_atomic(junit, reports::junit_xml(r), &err)) {
      std::fprintf(stderr, "shmstress: cannot write JUnit XML: %s\n", err.c_str());
      return false;
    }
    std::printf("junit: %s\n", junit.c_str());
  }
  if (!metrics.empty()) {
    if (fs::path(metrics).has_parent_path())
      fs::create_directories(fs::path(metrics).parent_path(), ec);
    if (!reports::write_metrics(r, metrics, rc, &err)) {
      std::fprintf(stderr, "shmstress: cannot write metrics: %s\n", err.c_str());
      return false;
    }
    std::printf("metrics: %s\n", metrics.c_str());
  }
  return true;
}

}  // namespace cli
