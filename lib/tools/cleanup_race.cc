// cleanup_race: does clean_stale remove a segment that a job created under a
// prefix it holds? (issue 10, flaw 1: snapshot -> unlock -> walk)
//
//   shmcoord_cleanup_race loop [cycles=10000] [pause_us=0]
//     The job runs acquire -> create "<prefix>_shard_states" -> stat -> release
//     `cycles` times while a second process runs clean_stale in a loop
//     (pausing `pause_us` between runs). Another live job holds a prefix
//     throughout, as on any busy node (it also keeps the registry from being
//     retired between cycles).
//   shmcoord_cleanup_race paused [rounds=100]
//     Deterministic: each round, a cleanup stops itself (SIGSTOP from a libfiu
//     callback) at the second directory listing it makes - after it has judged
//     the registry - while the job acquires a prefix and creates its segment;
//     then the cleanup resumes and finishes.
// A cycle or round whose stat fails lost its segment while its job held the
// prefix. Prints "lost segments: L/N ..." and exits 1 if L > 0. Uses only the
// public API shmcoord has had from the start (and libfiu), so the same file
// builds against any version of lib/. Everything lives under a private root
// and lock dir, removed at exit.
#include <dirent.h>
#include <fcntl.h>
#include <fiu-control.h>
#include <fiu.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "shmcoord/cleanup.h"
#include "shmcoord/registry.h"

namespace {

shmcoord::Namespace g_ns;

shmcoord::JobSpec one_rank(std::string key) {
  shmcoord::JobSpec spec;
  spec.job_key = std::move(key);
  spec.local_rank = 0;
  spec.local_world_size = 1;
  return spec;
}

// One cycle of the job: true if its segment vanished while it held the prefix.
// `between` runs after the create, before the stat.
template <typename F>
bool cycle(shmcoord::Registry& reg, const std::string& key, long* failed, std::string* last, F between) {
  auto l = reg.acquire(one_rank(key));
  if (!l) {
    ++*failed;
    *last = l.error().to_string();
    return false;
  }
  const std::string name = g_ns.shm_name(shmcoord::Namespace::prefix_suffix(l->prefix, "shard_states"));
  bool lost = false;
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    ++*failed;
    *last = "create " + name + ": " + std::strerror(errno);
  } else {
    ::close(fd);
    between();
    struct stat st{};
    lost = ::lstat(("/dev/shm" + name).c_str(), &st) < 0;
  }
  if (!reg.release(*l)) ++*failed;
  return lost;
}

int g_lists = 0;
int stop_at_second_listing(const char*, int*, void**, unsigned*) {
  if (++g_lists == 2) ::raise(SIGSTOP);
  return 0;  // never fail the call itself
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "loop";
  const long n = argc > 2 ? std::atol(argv[2]) : (mode == "loop" ? 10000 : 100);
  const long pause_us = argc > 3 ? std::atol(argv[3]) : 0;
  if (mode != "loop" && mode != "paused") {
    std::fprintf(stderr, "usage: %s loop [cycles] [pause_us] | paused [rounds]\n", argv[0]);
    return 2;
  }
  char dir[] = "/tmp/shmcoord-race-XXXXXX";
  if (!::mkdtemp(dir)) return 2;
  g_ns.root = "race." + std::to_string(::getpid()) + ".";
  g_ns.lock_dir = dir;
  struct Shared {
    std::atomic<int> stop;
    std::atomic<long> runs, errors;
  };
  auto* sh = static_cast<Shared*>(::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED) return 2;
  sh->stop = 0;
  sh->runs = sh->errors = 0;
  long lost = 0, failed = 0;
  std::string last_error;
  const auto t0 = std::chrono::steady_clock::now();
  auto reg = shmcoord::Registry::open(g_ns);
  std::optional<shmcoord::Lease> other;
  if (reg) {
    if (auto l = reg->acquire(one_rank("other-live-job"))) other = *l;
  }
  if (!reg || !other) {
    std::fprintf(stderr, "setup failed\n");
    return 2;
  }
  if (mode == "loop") {
    pid_t cleaner = ::fork();
    if (cleaner == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      while (sh->stop.load() == 0) {
        (shmcoord::clean_stale(g_ns) ? sh->runs : sh->errors).fetch_add(1);
        if (pause_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
      }
      ::_exit(0);
    }
    for (long i = 0; i < n; ++i) lost += cycle(*reg, "job" + std::to_string(i), &failed, &last_error, [] {});
    sh->stop = 1;
    ::waitpid(cleaner, nullptr, 0);
  } else {
    for (long i = 0; i < n; ++i) {
      pid_t cleaner = ::fork();
      if (cleaner == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        fiu_init(0);
        fiu_enable_external("shm/dir/list", 1, nullptr, 0, &stop_at_second_listing);
        (shmcoord::clean_stale(g_ns) ? sh->runs : sh->errors).fetch_add(1);
        ::_exit(0);
      }
      int st = 0;
      if (::waitpid(cleaner, &st, WUNTRACED) != cleaner || !WIFSTOPPED(st)) {
        ++failed;
        last_error = "the cleanup did not stop at its second listing";
        continue;
      }
      // The cleanup is stopped; the job acquires (it may have to wait for the
      // lock the cleanup holds: then the cleanup is resumed first).
      pid_t resumer = ::fork();
      if (resumer == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ::kill(cleaner, SIGCONT);
        ::_exit(0);
      }
      lost += cycle(*reg, "job" + std::to_string(i), &failed, &last_error, [&] {
        ::kill(cleaner, SIGCONT);
        ::waitpid(cleaner, nullptr, 0);
      });
      ::waitpid(resumer, nullptr, 0);
      ::waitpid(cleaner, nullptr, 0);
    }
  }
  (void)reg->release(*other);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("lost segments: %ld/%ld (%s; cleanups ran %ld times, %ld errors; %ld failed%s%s; %.1f s)\n", lost, n,
              mode.c_str(), sh->runs.load(), sh->errors.load(), failed, last_error.empty() ? "" : ", last: ",
              last_error.c_str(), secs);
  (void)shmcoord::clean_stale(g_ns);
  if (DIR* d = ::opendir("/dev/shm")) {
    std::vector<std::string> names;
    while (auto* e = ::readdir(d)) {
      if (std::string(e->d_name).rfind(g_ns.root, 0) == 0) names.emplace_back(e->d_name);
    }
    ::closedir(d);
    for (const auto& nm : names) ::shm_unlink(("/" + nm).c_str());
  }
  std::filesystem::remove_all(dir);
  return lost > 0 ? 1 : 0;
}
