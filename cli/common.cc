#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <toml++/toml.h>

#include "cli/cli.h"
#include "harness/run.h"
#include "harness/files.h"
#include "harness/scenario.h"
#include "harness/stored.h"
#include "harness/summary.h"
#include "harness/subjects.h"
#include "harness/worker_exe.h"
#include "reports/reports.h"

namespace cli {

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "shmstress" : p.string();
}

std::string default_worker_exe() {
  static const std::string exe = [] {
    harness::WorkerExe w = harness::stock_worker_exe(self_exe());
    if (!w.note.empty()) std::fprintf(stderr, "shmstress: note: %s\n", harness::printable_text(w.note).c_str());
    return w.exe;
  }();
  return exe;
}

std::string canonical_or(const fs::path& p) {
  std::error_code ec;
  auto c = fs::canonical(p, ec);
  return ec ? p.string() : c.string();
}

bool stdout_color() { return ::isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR"); }

std::optional<StoredTrial> load_stored_trial(const fs::path& t, std::string* err) {
  harness::ScenarioError e;
  auto s = harness::load_scenario((t / "scenario.toml").string(), &e);
  if (!s) {
    *err = e.to_string();
    return std::nullopt;
  }
  harness::StoredError se;
  auto sched = harness::load_schedule((t / "schedule.json").string(), &se);
  if (!sched) {
    *err = se.to_string();
    return std::nullopt;
  }
  if (sched->scenario) s->name = *sched->scenario;
  if (sched->scenario_file) s->file = *sched->scenario_file;
  return StoredTrial{std::move(*s), std::move(*sched)};
}

harness::TrialResult recheck_trial(const fs::path& t, std::optional<harness::Scenario>* s,
                                   std::string* err) {
  auto stored = load_stored_trial(t, err);
  if (!stored) {
    s->reset();
    return {};
  }
  *s = stored->scenario;
  const harness::StoredSchedule& sched = stored->schedule;
  return harness::check_trial_dir(**s, t.string(), sched.trial, sched.run_seed, sched.seed);
}

namespace {

bool is_trial_dir(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p / "history.jsonl", ec) && fs::exists(p / "scenario.toml", ec);
}

}  // namespace

std::vector<fs::path> find_trial_dirs(const std::string& dir, bool with_replays) {
  std::vector<fs::path> trials;
  std::error_code ec;
  if (is_trial_dir(dir)) trials.push_back(dir);
  for (auto it = fs::recursive_directory_iterator(
           dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    // A trial's replays (<trial>/replays/), not a scenario named "replays".
    if (!with_replays && it->path().filename() == "replays" && is_trial_dir(it->path().parent_path())) {
      it.disable_recursion_pending();
      continue;
    }
    if (is_trial_dir(it->path())) trials.push_back(it->path());
  }
  std::sort(trials.begin(), trials.end());
  return trials;
}

std::optional<harness::StoredSummary> find_run_summary(const fs::path& dir, std::string* err) {
  std::error_code ec;
  fs::path p = fs::canonical(dir, ec);
  for (int up = 0; !ec && up < 3 && !p.empty(); ++up, p = p.parent_path()) {
    std::error_code exists_ec;
    if (fs::exists(p / "summary.json", exists_ec)) {
      harness::StoredError e;
      auto s = harness::load_summary((p / "summary.json").string(), &e);
      if (!s) *err = e.to_string();
      return s;
    }
    if (p == p.parent_path()) break;
  }
  return harness::StoredSummary{};
}

std::optional<harness::RunResult> read_run_result(const std::string& dir_or_file, fs::path* file, std::string* err) {
  *file = fs::is_directory(dir_or_file) ? fs::path(dir_or_file) / "summary.json" : fs::path(dir_or_file);
  if (!fs::exists(*file)) {
    *err = file->string() + ": no summary.json (is it a run dir?)";
    return std::nullopt;
  }
  harness::StoredError e;
  auto s = harness::load_summary(file->string(), &e);
  std::optional<harness::RunResult> r;
  if (s) r = harness::run_result_of(*s, &e);
  if (!r) *err = e.to_string();
  return r;
}

void follow_trial_run(const TrialRunFlags& original, harness::RunOptions* o) {
  o->sometimes = !original.no_sometimes;
  if (original.no_sometimes) o->reproduce_flags += " --no-sometimes";
  o->zygote = !original.exec_workers;
  if (original.exec_workers) o->reproduce_flags += " --exec-workers";
}

std::optional<TrialRunFlags> trial_run_flags(const fs::path& trial_dir, std::string* err) {
  auto summary = find_run_summary(trial_dir, err);
  if (!summary) return std::nullopt;
  TrialRunFlags f;
  auto repro = summary->reproduce_by_dir();
  if (auto it = repro.find(trial_dir.string()); it != repro.end()) {
    f.worker_bin = reports::command_flag(it->second, "--worker-bin");
    f.subject = reports::command_flag(it->second, "--subject");
    const std::string words = " " + it->second + " ";
    auto has = [&words](const char* flag) { return words.find(" " + std::string(flag) + " ") != std::string::npos; };
    f.no_mount_ns = has("--no-mount-ns");
    f.allow_shared_shm = has("--allow-shared-shm");
    f.no_sometimes = has("--no-sometimes");
    f.exec_workers = has("--exec-workers");
  }
  // The trial's own record wins: it is there for passing trials too, which
  // have no reproduce command, and it names a scenario's own subject.
  // A schedule.json that cannot be decoded is refused by whoever replays the
  // trial (with its file:where); here it only names no subject.
  harness::StoredError serr;
  if (auto sched = harness::load_schedule((trial_dir / "schedule.json").string(), &serr);
      sched && sched->subject && !sched->subject->empty()) {
    f.subject = *sched->subject;
  }
  // Neither names one (a schedule.json edited to drop it): the scenario copy's
  // own `subject` is what the trial would run, so it is the stored command
  // refuse_stored_command() judges, and what a replay runs (resolved from
  // here, never from subjects/ beside the trial dir).
  if (!f.subject) {
    if (auto text = harness::read_regular_file((trial_dir / "scenario.toml").string(), harness::kMaxUserFileBytes,
                                               nullptr)) {
      try {
        const toml::table t = toml::parse(*text);
        if (auto s = t["subject"].value<std::string>(); s && !s->empty()) f.subject = *s;
      } catch (const std::exception&) {
        // Refused with its file:line by whoever loads the scenario.
      }
    }
  }
  return f;
}

std::optional<std::string> refuse_stored_command(const TrialRunFlags& stored, bool user_subject,
                                                 bool user_worker_bin, bool allowed) {
  if (allowed) return std::nullopt;
  const std::string how =
      ": replaying runs that command, as this user. Read it; then pass --allow-stored-command to run it, or "
      "choose what runs with --subject / --worker-bin";
  if (!user_worker_bin && stored.worker_bin && canonical_or(*stored.worker_bin) != canonical_or(self_exe())) {
    return "the trial ran --worker-bin " + harness::printable_text(*stored.worker_bin) +
           " (from its run's summary.json)" + how;
  }
  if (!user_subject && stored.subject && !stored.subject->empty() && *stored.subject != "native") {
    if (stored.subject->rfind("exec:", 0) == 0) {
      return "the trial ran --subject " + harness::printable_text(*stored.subject) +
             " (from its schedule.json or its run's summary.json)" + how;
    }
    // A named subject: the user's own only if ./subjects has it.
    std::string why;
    if (!harness::resolve_subject(*stored.subject, {}, &why)) {
      return "the trial ran subject '" + harness::printable_text(*stored.subject) +
             "', which ./subjects does not have: " + harness::printable_text(why) + how;
    }
  }
  return std::nullopt;
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
  o->subject_shm_size = subj->shm_size;
  o->reproduce_flags += " --subject " + shell_word(spec);
  return true;
}

int prepare_out_dir(const std::string& path, std::string* why) {
  if (path.find('\0') != std::string::npos) {
    *why = "the path holds a NUL byte";
    return 2;
  }
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      *why = "exists and is not a directory";
      return 2;
    }
  } else if (errno == ENOTDIR) {
    *why = "part of the path is a file, not a directory";
    return 2;
  }
  // The nearest existing ancestor says which filesystem it would be on.
  std::error_code ec;
  fs::path probe = fs::absolute(path, ec);
  while (!ec && !probe.empty() && ::stat(probe.c_str(), &st) != 0 && probe != probe.parent_path())
    probe = probe.parent_path();
  struct statfs sfs{};
  if (!ec && ::statfs(probe.c_str(), &sfs) == 0 &&
      (sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC)) {
    *why = std::string("is under ") + (sfs.f_type == PROC_SUPER_MAGIC ? "/proc" : "/sys") +
           ", a kernel filesystem that cannot hold a run directory";
    return 2;
  }
  fs::create_directories(path, ec);
  if (ec) {
    *why = "cannot create it: " + ec.message();
    return ec == std::errc::not_a_directory || ec == std::errc::file_exists ? 2 : 3;
  }
  // Root ignores modes, not read-only mounts: write something to know.
  const std::string file = path + "/.shmstress-probe-" + std::to_string(::getpid());
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, "x", 1) != 1) {
    *why = std::string("cannot write in it: ") + std::strerror(errno);
    if (fd >= 0) ::close(fd), ::unlink(file.c_str());
    return 3;
  }
  ::close(fd);
  ::unlink(file.c_str());
  return 0;
}

std::optional<RunDirLock> RunDirLock::take(const std::string& dir, std::string* why, int* rc) {
  const std::string file = dir + "/.shmstress.lock";
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644);
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int e = errno;
    *rc = fd >= 0 || e == ELOOP ? 2 : 3;
    *why = fd >= 0 || e == ELOOP ? file + " is not a lock file shmstress made"
                                 : "cannot create " + file + ": " + std::strerror(e);
    if (fd >= 0) ::close(fd);
    return std::nullopt;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd);
    *rc = e == EWOULDBLOCK ? 2 : 3;
    *why = e == EWOULDBLOCK ? "is in use by a live run (it holds " + file + "); give another --out"
                            : "cannot lock " + file + ": " + std::strerror(e);
    return std::nullopt;
  }
  return RunDirLock(fd);
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        std::int64_t v = 0;
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, v);
        const bool digits = !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) ||
                                              (text[0] == '-' && text.size() > 1));
        if (!digits || ec != std::errc() || ptr != end || v < lo || v > hi) {
          return "expected an integer in " + range + ", got '" + text + "'";
        }
        return {};
      },
      "INT in " + range);
}

CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) ||
            ec != std::errc() || ptr != end) {
          return "expected an integer in 1..18446744073709551615, got '" + text + "'";
        }
        if (v == 0) return "0 is not a seed (leave --seed out for a random one)";
        return {};
      },
      "UINT64");
}

bool write_timeline(const harness::TrialResult& t, const harness::Scenario& s) {
  std::string err;
  if (!reports::write_timeline(t, harness::meta_for(s, t.seed), &err)) {
    std::fprintf(stderr, "shmstress: no timeline for %s: %s\n", t.dir.c_str(), err.c_str());
    return false;
  }
  return true;
}

bool report_written(const std::optional<harness::OutputError>& e, const char* what, int* failed) {
  if (!e) return true;
  std::fprintf(stderr, "shmstress: cannot write %s: %s\n", what, e->message.c_str());
  if (*failed == 0) *failed = e->exit_code;
  return false;
}

std::optional<harness::OutputError> check_user_outputs(const std::vector<std::string>& paths) {
  for (const auto& p : paths) {
    if (p.empty()) continue;
    if (auto e = harness::check_output(p, harness::OutputOrigin::kUser)) return e;
  }
  return std::nullopt;
}

int write_ci_reports(const harness::RunResult& r, int rc, const std::string& junit,
                     const std::string& metrics) {
  int failed = 0;
  for (const auto& f : {junit, metrics}) {
    std::error_code ec;
    if (!f.empty() && fs::path(f).has_parent_path()) fs::create_directories(fs::path(f).parent_path(), ec);
  }
  if (!junit.empty() &&
      report_written(harness::write_output(junit, reports::junit_xml(r), harness::OutputOrigin::kUser),
                     "JUnit XML", &failed)) {
    std::printf("junit: %s\n", junit.c_str());
  }
  if (!metrics.empty() && report_written(reports::write_metrics(r, metrics, rc), "metrics", &failed)) {
    std::printf("metrics: %s\n", metrics.c_str());
  }
  return failed;
}

}  // namespace cli
