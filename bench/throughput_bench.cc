// Throughput of the real binary, in one run so the numbers sit side by side:
//
// - Catalog/parallel:N runs the stock catalog (scenarios/*.toml, native
//   subject) for SHMSTRESS_BENCH_SECONDS (default 30) at --parallel N, and
//   parallel:0 at the default (no --parallel: the adaptive concurrency,
//   harness/concurrency.h). Counters: trials/s, violating trials (the catalog
//   is green against shmcoord, so any is a false alarm), the mean and highest
//   number of trials at once.
// - FirstViolation/mutant:M/default:D runs the catalog against the known-bad
//   worker tests/mutants/M (the ones whose e2e test is enabled) with
//   --stop-on-violation, at --parallel 2 (D=0: the old default, the cores of
//   the 2-core CI machine) and at the default (D=1), over
//   SHMSTRESS_BENCH_SEEDS seeds (default 2); counter: seconds to the first
//   violation (the mean wall time of the stopped runs), and how many runs
//   found one within the 60 s budget.
//
// Each run is a child `shmstress run` whose summary.json is read back; its
// scratch dir is removed. Only meaningful on an otherwise idle machine: run it
// under the build lock (COORD.md).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "catalog.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

// The mutants whose e2e test is enabled (tests/mutants/*.patch minus PENDING).
std::vector<std::string> mutants() {
  std::vector<std::string> pending, out;
  std::ifstream p(SHMSTRESS_SOURCE_DIR "/tests/mutants/PENDING");
  for (std::string line; std::getline(p, line);) pending.push_back(line);
  for (const auto& e : fs::directory_iterator(SHMSTRESS_SOURCE_DIR "/tests/mutants"))
    if (e.path().extension() == ".patch") {
      const std::string name = e.path().stem().string();
      if (std::find(pending.begin(), pending.end(), name) == pending.end()) out.push_back(name);
    }
  std::sort(out.begin(), out.end());
  return out;
}

struct Outcome {
  int exit_code = -1;
  double wall_s = 0;
  nlohmann::json summary;
};

// Runs `shmstress run <catalog> <extra...> --out <scratch>` with its output to
// /dev/null, and reads its summary.json.
Outcome run_catalog(const std::vector<std::string>& extra) {
  char tmpl[] = "/tmp/shmbench-tp-XXXXXX";
  const std::string out = mkdtemp(tmpl);
  std::vector<std::string> args = {SHMSTRESS_BIN, "run"};
  for (auto& f : bench::catalog()) args.push_back(f);
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--out");
  args.push_back(out + "/run");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  Outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = -1;
  if (posix_spawn(&pid, SHMSTRESS_BIN, &fa, nullptr, argv.data(), environ) == 0) {
    int st = 0;
    waitpid(pid, &st, 0);
    o.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  posix_spawn_file_actions_destroy(&fa);
  std::ifstream f(out + "/run/summary.json");
  o.summary = nlohmann::json::parse(f, nullptr, false);
  fs::remove_all(out);
  return o;
}

void Catalog(benchmark::State& state) {
  const int parallel = static_cast<int>(state.range(0));
  const int seconds = env_int("SHMSTRESS_BENCH_SECONDS", 30);
  double trials = 0, elapsed = 0, violating = 0, mean = 0, highest = 0;
  int bad_exit = 0;
  for (auto _ : state) {
    std::vector<std::string> extra = {"--duration", std::to_string(seconds) + "s", "--seed", "20261123"};
    if (parallel > 0) {
      extra.push_back("--parallel");
      extra.push_back(std::to_string(parallel));
    }
    Outcome o = run_catalog(extra);
    if (o.summary.is_discarded() || o.exit_code == 3) {
      state.SkipWithError(("shmstress run exited " + std::to_string(o.exit_code) + " without a summary").c_str());
      return;
    }
    if (o.exit_code != 0) ++bad_exit;
    trials += o.summary.value("trials", 0.0);
    elapsed += o.summary.value("elapsed_s", 0.0);
    // Failing trials (violations, unknown verdicts, harness errors): false alarms.
    violating += o.summary["tally"]["totals"].value("failing", 0.0);
    const auto c = o.summary.value("concurrency", nlohmann::json::object());
    mean = c.value("mean", 0.0);
    highest = c.value("highest", 0.0);
  }
  state.counters["trials/s"] = elapsed > 0 ? trials / elapsed : 0;
  state.counters["trials"] = trials;
  state.counters["violating"] = violating;
  state.counters["exit!=0"] = bad_exit;
  state.counters["mean_at_once"] = mean;
  state.counters["most_at_once"] = highest;
}

void FirstViolation(benchmark::State& state) {
  const auto names = mutants();
  const std::size_t m = static_cast<std::size_t>(state.range(0));
  if (m >= names.size()) {
    state.SkipWithError("no such mutant");
    return;
  }
  const bool adaptive = state.range(1) == 1;
  const std::string worker = fs::path(SHMSTRESS_BIN).parent_path() / "mutants" / ("shmstress-worker-" + names[m]);
  state.SetLabel(names[m] + (adaptive ? " default" : " --parallel 2"));
  const int seeds = env_int("SHMSTRESS_BENCH_SEEDS", 2);
  double total = 0;
  int found = 0, runs = 0;
  for (auto _ : state) {
    for (int s = 0; s < seeds; ++s) {
      std::vector<std::string> extra = {"--worker-bin", worker, "--stop-on-violation", "--duration", "60s",
                                        "--seed",       std::to_string(20261121 + s)};
      if (!adaptive) {
        extra.push_back("--parallel");
        extra.push_back("2");
      }
      Outcome o = run_catalog(extra);
      ++runs;
      total += o.wall_s;
      if (o.exit_code == 1) ++found;
    }
  }
  state.counters["s_to_first"] = runs ? total / runs : 0;
  state.counters["found"] = found;
  state.counters["runs"] = runs;
}

void mutant_args(benchmark::internal::Benchmark* b) {
  const auto n = static_cast<int>(mutants().size());
  for (int m = 0; m < n; ++m)
    for (int d : {0, 1}) b->Args({m, d});
}

}  // namespace

BENCHMARK(Catalog)
    ->ArgName("parallel")
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Arg(32)
    ->Arg(0)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);
BENCHMARK(FirstViolation)
    ->ArgNames({"mutant", "default"})
    ->Apply(mutant_args)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);
BENCHMARK_MAIN();
