// Harness overhead: what a user pays per trial of N no-op workers (plan,
// trial dir, supervisor with pid and mount namespaces, spawn, gate, reaping,
// audit, the harness's check of the history), against the bare cost of
// posix_spawn + waitpid of the same N worker processes, measured in the same
// run. The bare spawns exec the stock worker (build/shmstress-worker,
// harness/worker_exe.h); a trial, by default, forks its workers from the
// run's zygote, that worker exec'd once per run (harness/zygote.h), and
// HarnessTrialExec is the same trial with every worker exec'd
// (--exec-workers): what the zygote saves is the difference.
//
// HarnessTrial is the steady state of a run, one trial at a time
// (--parallel 1: what a trial's life costs end to end, every step serial):
// one harness::run of kTrials trials per iteration, its time divided by
// kTrials (a run pays its fixed cost, below, once, and a soak pays it once
// for thousands of trials). HarnessTrialDefault is the same run at the
// concurrency a user gets without flags (adaptive, concurrency.h): a soak's
// cost per trial, where one trial's waits (a worker's exec, the gate round
// trip, the namespace's teardown) overlap another's work.
// HarnessRun is a whole run of one trial, as a `shmstress replay` pays it:
// its time minus HarnessTrial's is the per-run fixed cost (out dir, run
// lease, timers; no reports: the bench attaches no subscribers).
// BareSpawnGated is BareSpawn with a trial's aligned start: what the design
// costs before any of the harness's own steps. Target (issue 23): rounds/s
// at least 0.8x BareSpawn's at 4 and 16 workers.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "catalog.h"
#include "harness/run.h"

extern char** environ;

namespace {

const char* kNoOps = R"({"acquire":false,"rounds":0,"release":false,"segments":[],"clean_before":false,"clean_after":false})";

// `shmstress-worker worker` with our environment, a no-op workload and
// `extra`: what the bare spawns exec, as a trial would.
class NoOpWorker {
 public:
  explicit NoOpWorker(std::vector<std::string> extra) {
    for (char** e = environ; *e; ++e) env_s_.emplace_back(*e);
    env_s_.push_back(std::string("SHMSTRESS_OPS=") + kNoOps);
    for (auto& x : extra) env_s_.push_back(std::move(x));
    for (auto& s : env_s_) env_.push_back(s.data());
    env_.push_back(nullptr);
  }
  NoOpWorker(const NoOpWorker&) = delete;  // argv_ and env_ point into this object
  NoOpWorker& operator=(const NoOpWorker&) = delete;
  // The worker's pid, or -1 if it could not be started.
  pid_t spawn(const posix_spawn_file_actions_t* fa = nullptr) {
    pid_t pid = -1;
    return posix_spawn(&pid, SHMSTRESS_WORKER_BIN, fa, nullptr, argv_, env_.data()) == 0 ? pid : -1;
  }

 private:
  std::vector<std::string> env_s_;
  std::vector<char*> env_;
  char arg0_[sizeof SHMSTRESS_WORKER_BIN] = SHMSTRESS_WORKER_BIN;
  char arg1_[7] = "worker";
  char* argv_[3] = {arg0_, arg1_, nullptr};
};

// N processes per round, `in_flight` rounds at once (1: one round, then the
// next). With several in flight, the machine's own ceiling for rounds of N
// processes: what HarnessTrialDefault, many trials at once, compares with.
void Spawn(benchmark::State& state, int in_flight) {
  const int n = static_cast<int>(state.range(0)) * in_flight;
  NoOpWorker worker({"SHMSTRESS_EVENTS=/dev/null", "SHMSTRESS_ROOT=shmbench.bare."});
  for (auto _ : state) {
    std::vector<pid_t> pids(n);
    for (int i = 0; i < n; ++i) pids[i] = worker.spawn();
    for (pid_t p : pids) {
      if (p > 0) waitpid(p, nullptr, 0);
    }
  }
  state.counters["rounds/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * in_flight, benchmark::Counter::kIsRate);
}

void BareSpawn(benchmark::State& state) { Spawn(state, 1); }

// The floor a trial's design sets on the same N processes: the aligned start
// a supervisor gives them (docs/worker-protocol.md). Each says `ready` (on
// a pipe here, a trial's history there) and waits at a FIFO gate, which is
// opened once all N have said so; none runs its (empty) workload before the
// last is up. BareSpawn overlaps the first workers' lives with the later
// spawns, which no trial may do: what is left between this and HarnessTrial
// is the harness's own (namespaces, supervisor, history, audit, check).
void BareSpawnGated(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  char tmpl[] = "/tmp/shmbench-gate-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    state.SkipWithError("cannot make a dir for the gate");
    return;
  }
  const std::string gate = std::string(tmpl) + "/gate";
  NoOpWorker worker({"SHMSTRESS_EVENTS_FD=3", "SHMSTRESS_GATE=" + gate, "SHMSTRESS_ROOT=shmbench.gated."});
  int stray = 0;
  for (auto _ : state) {
    int ev[2] = {-1, -1};
    const int gate_fd = mkfifo(gate.c_str(), 0600) == 0 ? open(gate.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC) : -1;
    if (gate_fd < 0 || pipe2(ev, O_CLOEXEC) != 0) {
      if (gate_fd >= 0) close(gate_fd);
      state.SkipWithError("cannot make the gate or the event pipe");
      break;
    }
    fcntl(ev[1], F_SETFL, O_APPEND);  // the worker takes only an append-mode fd for its events
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, ev[1], 3);  // dup2 clears FD_CLOEXEC
    std::vector<pid_t> pids;
    for (int i = 0; i < n; ++i) {
      if (pid_t p = worker.spawn(&fa); p > 0) pids.push_back(p);
    }
    posix_spawn_file_actions_destroy(&fa);
    close(ev[1]);
    // Every `ready` line of those started, as the supervisor's gate counts
    // them, for at most 10 s (as a trial's gate, a worker that dies or hangs
    // before it is ready must not hold the others forever). What they write
    // after the gate fits in the pipe: a no-op worker writes a few lines.
    std::string buf;
    int ready = 0;
    char chunk[4096];
    struct pollfd pfd {ev[0], POLLIN, 0};
    while (ready < static_cast<int>(pids.size()) && poll(&pfd, 1, 10000) == 1) {
      const ssize_t got = read(ev[0], chunk, sizeof chunk);
      if (got <= 0) break;  // every worker gone
      buf.append(chunk, static_cast<std::size_t>(got));
      for (std::size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
        if (buf.substr(0, nl).find("\"type\":\"ready\"") != std::string::npos) ++ready;
      }
    }
    if (ready < n) ++stray;
    close(gate_fd);  // the gate opens: every worker reads end-of-file
    unlink(gate.c_str());
    for (pid_t p : pids) waitpid(p, nullptr, 0);
    close(ev[0]);
  }
  std::filesystem::remove_all(std::filesystem::path(gate).parent_path());
  state.counters["rounds/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["not_ready"] = stray;
}
void BareSpawnMany(benchmark::State& state) { Spawn(state, 8); }

// Trials per run in HarnessTrial: enough that the run's fixed cost is a few
// percent of the time per trial.
constexpr int kTrials = 40;

// Runs `trials_per_run` trials of N no-op ranks per iteration, `parallel`
// at a time (0: adaptive, the default); rounds/s counts trials.
void RunTrials(benchmark::State& state, int trials_per_run, int parallel, bool zygote = true) {
  const int n = static_cast<int>(state.range(0));
  harness::Scenario s;
  s.name = "noop";
  s.file = "noop.toml";
  s.raw_toml = "# generated by harness_bench\n";
  s.final_cleanup = false;
  harness::JobSpec j;
  j.ranks = n;
  j.workload.acquire = false;
  j.workload.release = false;
  s.jobs.push_back(j);
  char tmpl[] = "/tmp/shmbench-runs-XXXXXX";
  std::string out = mkdtemp(tmpl);
  harness::RunOptions opt;
  opt.exe = SHMSTRESS_WORKER_BIN;
  opt.invocation = SHMSTRESS_BIN;
  opt.parallel = parallel;
  opt.sometimes = false;  // a no-op worker passes no failpoint: no pause to plan
  opt.zygote = zygote;
  opt.seed = 1;
  opt.out_dir = out;
  int saved = dup(STDERR_FILENO);  // the run's progress lines
  int devnull = open("/dev/null", O_WRONLY);
  dup2(devnull, STDERR_FILENO);
  int failed = 0;
  std::int64_t trials = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    opt.trials = trials_per_run;
    auto r = harness::run({s}, opt);
    if (r.exit_code() != 0 || r.tally.trials() != static_cast<std::uint64_t>(trials_per_run)) ++failed;
    trials += trials_per_run;
  }
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(devnull);
  std::filesystem::remove_all(out);
  state.counters["rounds/s"] = benchmark::Counter(static_cast<double>(trials), benchmark::Counter::kIsRate);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  state.counters["ms/trial"] = trials > 0 ? ms / static_cast<double>(trials) : 0;
  state.counters["failed"] = failed;
}

void HarnessTrial(benchmark::State& state) { RunTrials(state, kTrials, 1); }
void HarnessTrialDefault(benchmark::State& state) { RunTrials(state, kTrials, 0); }
void HarnessTrialExec(benchmark::State& state) { RunTrials(state, kTrials, 1, false); }
void HarnessTrialDefaultExec(benchmark::State& state) { RunTrials(state, kTrials, 0, false); }
void HarnessRun(benchmark::State& state) { RunTrials(state, 1, 1); }

// What every `shmstress run scenarios/*.toml` pays before its first trial:
// the load and the validation of the catalog (LoadAndValidateCatalog), of
// which parsing the files is LoadCatalog; the rest is the conflict draws
// (kValidationTrials plans a scenario, harness/run.cc).
void LoadCatalog(benchmark::State& state) {
  const auto files = bench::catalog();
  int failed = 0;
  for (auto _ : state) {
    for (const auto& f : files) {
      harness::ScenarioError e;
      if (!harness::load_scenario(f, &e)) ++failed;
    }
  }
  state.counters["files"] = static_cast<double>(files.size());
  state.counters["failed"] = failed;
}
void LoadAndValidateCatalog(benchmark::State& state) {
  const auto files = bench::catalog();
  int failed = 0;
  for (auto _ : state) {
    std::vector<harness::Scenario> out;
    std::string err;
    if (!harness::load_and_validate(files, &out, &err)) ++failed;
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["files"] = static_cast<double>(files.size());
  state.counters["failed"] = failed;
}

}  // namespace

BENCHMARK(BareSpawn)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BareSpawnGated)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BareSpawnMany)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(HarnessTrial)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(HarnessTrialExec)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(HarnessTrialDefault)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(HarnessTrialDefaultExec)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(HarnessRun)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(LoadCatalog)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(LoadAndValidateCatalog)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
