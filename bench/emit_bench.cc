// What the native worker spends between stamping a line and writing it: an
// op's completion, its JSON split over lines of at most PIPE_BUF bytes and
// written, as EventLog::emit does (to /dev/null here). A cut passes a silent
// worker's last line once the worker has run more than that since a look
// (supervisor_spin.cc, kEmitCpuNs: 20 ms), so the bound must hold for the
// largest event a worker writes: a cleanup's report of every name it
// removed. Arg: how many names (150 is where issue 20's adapter used to cut
// its report; the catalog's longest line is 1.1 KB, a few tens). Measured
// 2026-11-29: 3 us, 0.2 ms, 5 ms and 89 ms for 1, 150, 2,000 and 20,000.
#include <benchmark/benchmark.h>

#include <string>

#include "events.h"

namespace {

void EmitCleanReport(benchmark::State& state) {
  nlohmann::json removed = nlohmann::json::array();
  for (int i = 0; i < state.range(0); ++i)
    removed.push_back("/shmstress.12345.1732800000.000001_shard_states_" + std::to_string(i));
  const nlohmann::json e{{"type", "ok"},
                         {"op", "clean"},
                         {"id", 7},
                         {"job", 0},
                         {"rank", 0},
                         {"local_rank", 0},
                         {"pid", 4},
                         {"t", 82570568080628},
                         {"cpu_wait_ns", 4396023648},
                         {"cpu_run_ns", 113500500},
                         {"value", {{"removed", removed}, {"kept", nlohmann::json::array()}}}};
  harness::EventLog log("/dev/null");
  for (auto _ : state) log.emit(e);
}

}  // namespace

BENCHMARK(EmitCleanReport)->Arg(1)->Arg(150)->Arg(2000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
