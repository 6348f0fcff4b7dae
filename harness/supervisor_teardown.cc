// The trial's end: heal what the faults left (pauses end, held locks are
// released), tear the workers down, the cleanup step, and the audit of what
// is left behind (segments, locks, orphans) and of the logs' size.
#include "supervisor_internal.h"

namespace harness::supervision {

// The heal: helpers go (their locks with them), every stopped worker
// continues, every open fault window closes; on timeout, or at a cut (the
// trial already judged, supervisor_cut.cc), every worker is killed.
void Supervisor::heal_and_teardown() {
  healing_ = true;
  std::vector<Timer> left = std::move(timers_);
  timers_.clear();
  for (auto& t : left) {
    if (t.at_heal) t.fn();
  }
  const std::int64_t helpers_killed = mono_ns();  // their windows end here, before the kills
  for (pid_t h : helpers_) {
    ::kill(h, SIGKILL);
    ::kill(h, SIGCONT);
  }
  // Their locks are released only once they are dead: wait, so the cleanup
  // step that follows does not find them still held.
  for (pid_t h : helpers_) {
    while (::waitpid(h, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  helpers_.clear();
  for (const auto& [kind, detail] : seeded_) {
    if (kind.empty() || kind == "containers") continue;  // containers close after the audit
    end_seeded(kind, detail, helpers_killed);
  }
  for (auto& [pid, w] : workers_) {
    if (w.alive) ::kill(pid, SIGCONT);
  }
  for (auto& [pid, t] : tracked_) {
    if (t.alive) ::kill(pid, SIGCONT);
  }
  if (!timed_out_ && !cut_) return;
  for (auto& [pid, t] : tracked_) {
    if (!t.alive) continue;
    t.killed_by_harness = true;
    t.teardown = true;
    ::kill(pid, SIGKILL);
  }
  for (auto& [pid, w] : workers_) {
    if (!w.alive) continue;
    w.killed_by_harness = true;
    w.teardown = true;
    ::kill(-pid, SIGKILL);  // its whole tree
    ::kill(pid, SIGKILL);
  }
}

// Reaps until done() (asked after each look) or `until`. It looks before
// it waits: a wait after the look that saw the last exit sleeps its whole
// 50 ms when that exit's SIGCHLD was drained by an earlier wait (trials
// with a cleanup step ended 50 ms late).
void Supervisor::reap_until(const std::function<bool()>& done, std::int64_t until) {
  for (;;) {
    reap();
    if (done() || mono_ns() >= until) return;
    wait_chld(until);
  }
}

void Supervisor::reap_until_workers_gone(std::int64_t until) {
  reap_until(
      [this] {
        poll_tracked();
        return !any_worker_alive();
      },
      until);
}

// One cleanup per namespace the trial used: the trial's own and each
// nested one ([job] root_suffix). Roots are prefix-free to a correct
// subject, so the outer namespace's cleanup never takes the inner one's
// names: each namespace is cleaned by its own, as its users would.
void Supervisor::cleanup_step() {
  std::set<std::string> suffixes = {""};
  for (const WorkerPlan& w : plan_.workers) {
    if (auto it = w.env.find("SHMSTRESS_ROOT_SUFFIX"); it != w.env.end())
      suffixes.insert(it->second);
  }
  int n = 0;
  for (const std::string& suffix : suffixes) {
    std::map<std::string, std::string> env = {
        {"SHMSTRESS_ROLE", "cleanup"}, {"SHMSTRESS_JOB", "-1"}, {"SHMSTRESS_RANK", "-1"}};
    if (!suffix.empty()) env["SHMSTRESS_ROOT_SUFFIX"] = suffix;
    cleanup_done_ = false;
    cleanup_pid_ = spawn(env, n++ == 0 ? "cleanup" : "cleanup-" + std::to_string(n - 1));
    if (cleanup_pid_ <= 0) return;
    Worker c{-1, -1};
    c.self_pid = cleanup_pid_;
    workers_[cleanup_pid_] = c;
    reap_until([this] { return cleanup_done_; }, mono_ns() + 10'000'000'000LL);
    if (!cleanup_done_) {
      ::kill(cleanup_pid_, SIGKILL);
      log_.emit({{"type", "harness-error"}, {"message", "cleanup step did not finish in 10 s"}});
      return;
    }
  }
}

// Names in /dev/shm with their inodes.
std::map<std::string, ino_t> Supervisor::shm_entries() {
  std::map<std::string, ino_t> out;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.emplace(std::move(n), e->d_ino);
    }
    ::closedir(d);
  }
  return out;
}

bool Supervisor::is_container_init(pid_t p) const {
  for (const auto& [id, box] : containers_) {
    if (box.init == p) return true;
  }
  return false;
}

// The trial's processes still alive besides us and our container inits. In
// our own pid namespace that is everything in /proc (containers' processes
// included): however a process forked, double-forked or left its group, it
// is in there. Without one, it is our children (we are the subreaper): a
// grandchild of a live orphan is only found once that orphan is gone, so
// the audit scans again after each kill.
std::vector<pid_t> Supervisor::descendants() const {
  std::vector<pid_t> out;
  const pid_t me = ::getpid();
  for (pid_t p : proc_pids()) {
    ProcStat ps;
    if (p == me || is_container_init(p) || !proc_stat(p, &ps) || ps.state == 'Z' || ps.state == 'X')
      continue;
    if (pid_ns_ || ps.ppid == me) out.push_back(p);
  }
  return out;
}

// Who a leftover entry belongs to: its owner uid if it is not ours.
int Supervisor::foreign_owner(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return -1;
  return st.st_uid != ::geteuid() ? static_cast<int>(st.st_uid) : -1;
}

// A worker's stdout/stderr.log holds at most kMaxWorkerLogBytes and then a
// line saying it was cut: a subject that prints without end must not fill
// the disk (one trial dir reached 201 MB). Checked every 100 ms while the
// trial runs and once more when every writer is gone (`final`).
void Supervisor::cap_logs(bool final) {
  static constexpr off_t kMaxWorkerLogBytes = off_t{1} << 20;
  static const std::string kMark = "\n[shmstress: log cut at " +
                                   std::to_string(kMaxWorkerLogBytes) +
                                   " bytes; the worker wrote more]\n";
  const std::int64_t now = mono_ns();
  if (!final && now < next_log_check_) return;
  next_log_check_ = now + 100'000'000;
  for (auto& log : logs_) {
    struct stat st {};
    if (log.fd < 0 || ::fstat(log.fd, &st) != 0 || st.st_size <= kMaxWorkerLogBytes) continue;
    if (log.cut && st.st_size == kMaxWorkerLogBytes + static_cast<off_t>(kMark.size())) continue;
    if (::ftruncate(log.fd, kMaxWorkerLogBytes) != 0) continue;
    (void)!::write(log.fd, kMark.data(), kMark.size());
    log.cut = true;
  }
}

void Supervisor::audit() {
  // Stragglers (resource trackers of killed workers, pool workers outliving
  // their killed parent) get a moment to finish: 1 s, or the scenario's
  // eventual bound (deadlines.cleanup), what they need to clean up on their own.
  const std::int64_t wait_ns = std::max<std::int64_t>(1'000'000'000LL, plan_.settle_ns);
  std::int64_t until = mono_ns() + wait_ns;
  std::optional<std::int64_t> settled_t;
  for (;;) {
    reap();
    watch_teardowns();
    if (descendants().empty()) {
      settled_t = mono_ns();
      break;
    }
    if (mono_ns() >= until) break;
    wait_chld(std::min(until, mono_ns() + 20'000'000));
  }
  reap();
  log_teardowns();  // before the audit kills whoever outlived its launcher
  Json orphans = Json::array();
  std::set<pid_t> seen;
  for (int round = 0; round < 50; ++round) {
    std::vector<pid_t> left = descendants();
    bool fresh = false;
    for (pid_t p : left) {
      if (seen.insert(p).second) {
        orphans.push_back(p);
        fresh = true;
      }
      ::kill(p, SIGKILL);
    }
    if (left.empty()) break;
    // Let the killed die and their children be re-parented to us, then look again.
    std::int64_t until2 = mono_ns() + 20'000'000;
    while (mono_ns() < until2) {
      reap();
      wait_chld(until2);
    }
    reap();
    if (!fresh && round > 5) break;
  }
  Json shm = Json::array(), locks = Json::array();
  // In the shared /dev/shm, outside the trial's root: new since the trial
  // began (a subject that ignores SHMSTRESS_ROOT, a daemon it left). Not
  // provably the trial's (with --allow-shared-shm other programs share
  // it), so reported, never removed.
  Json shared_new = Json::array();
  if (isolation_ == "name-root") {
    for (const auto& [n, ino] : shm_entries()) {
      auto before = shared_before_.find(n);
      if (n.rfind(root_, 0) == 0 || n.rfind("shmstress.", 0) == 0)
        continue;  // ours, or another trial's
      if (before == shared_before_.end() || before->second != ino) shared_new.push_back(n);
    }
  }
  std::map<int, Json> foreign;  // uid -> names another user's workers left
  const bool uid_faults = std::any_of(plan_.workers.begin(), plan_.workers.end(),
                                      [](const WorkerPlan& w) { return w.uid >= 0; });
  auto note_owner = [&](const std::string& path, const std::string& name) {
    if (!uid_faults) return;
    if (int uid = foreign_owner(path); uid >= 0) foreign[uid].push_back(name);
  };
  if (DIR* d = ::opendir("/dev/shm")) {
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      if (isolation_ == "mount-namespace" || n.rfind(root_, 0) == 0) {
        shm.push_back(n);
        note_owner("/dev/shm/" + n, n);
      }
    }
    ::closedir(d);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(lock_dir_, ec)) {
    std::string path = e.path().string();
    if (!lock_subdirs_.contains(path)) {
      locks.push_back(path);
      note_owner(path, path);
      continue;
    }
    // A lock dir the misconfig fault made for one rank: the harness's own,
    // not a leftover; what the rank left in it is.
    for (const auto& inner : fs::directory_iterator(path, ec)) {
      locks.push_back(inner.path().string());
      note_owner(inner.path().string(), inner.path().string());
    }
  }
  // Entries an unprivileged worker created are another user's: root's
  // cleanup is rightly forbidden to remove them, so they are no leak.
  for (const auto& [uid, names] : foreign) {
    log_.emit({{"type", "fault"},
               {"kind", "unprivileged"},
               {"phase", "instant"},
               {"job", -1},
               {"rank", -1},
               {"detail",
                {{"uid", uid},
                 {"foreign", true},
                 {"names", names},
                 {"why", "left by a worker running as uid " + std::to_string(uid) +
                             ": another user's"}}}});
  }
  Json audit = {{"type", "audit"},
                {"leftover_shm", shm},
                {"leftover_locks", locks},
                {"orphans", orphans},
                {"straggler_wait_ms", wait_ns / 1'000'000},
                {"stragglers_exited", settled_t.has_value()}};
  if (settled_t) audit["settled_t"] = *settled_t;
  if (!shared_new.empty()) audit["shared_shm_new"] = shared_new;
  log_.emit(std::move(audit));
  // The trial's own leftovers go now that they are on record (a mount namespace drops them anyway).
  if (isolation_ != "mount-namespace") {
    for (const auto& n : shm) ::shm_unlink(("/" + n.get<std::string>()).c_str());
  }
  fs::remove_all(lock_dir_, ec);
  // The containers go last: killing a container's init kills all in it.
  for (auto& [id, box] : containers_) {
    if (box.init <= 0) continue;
    ::kill(box.init, SIGKILL);
    while (::waitpid(box.init, nullptr, 0) < 0 && errno == EINTR) {
    }
    for (auto& [kind, detail] : seeded_) {
      if (kind == "containers" && detail.value("container", -1) == id) {
        log_.emit({{"type", "fault"},
                   {"kind", kind},
                   {"phase", "end"},
                   {"job", -1},
                   {"rank", -1},
                   {"detail", detail}});
      }
    }
  }
  cap_logs(true);  // every writer is gone
}

}  // namespace harness::supervision
