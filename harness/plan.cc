#include "plan.h"

#include <algorithm>

namespace harness {
namespace {

// splitmix64: decorrelates nearby inputs (trial 1, trial 2, ...).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

nlohmann::json range_json(MsRange r) { return nlohmann::json::array({r.min.count(), r.max.count()}); }

}  // namespace

std::uint64_t derive_seed(std::uint64_t parent, const std::string& salt, std::uint64_t index) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a of the salt
  for (unsigned char c : salt) h = (h ^ c) * 1099511628211ULL;
  return mix(mix(parent ^ h) + index);
}

nlohmann::json to_json(const TrialPlan& p) {
  nlohmann::json j;
  j["scenario"] = p.scenario;
  j["scenario_file"] = p.scenario_file;
  j["trial"] = p.trial;
  j["run_seed"] = p.run_seed;
  j["seed"] = p.seed;
  j["subject"] = p.subject;
  j["timeout_ms"] = p.timeout_ns / 1000000;
  j["final_cleanup"] = p.final_cleanup;
  if (p.settle_ns > 0) j["settle_ms"] = p.settle_ns / 1000000;
  auto worker_json = [](const WorkerPlan& w) {
    nlohmann::json x = {{"job", w.job}, {"rank", w.rank}, {"local_rank", w.local_rank}, {"env", w.env},
                        {"uid", w.uid}, {"nofile", w.nofile}, {"lock_subdir", w.lock_subdir}};
    if (w.container >= 0) x["container"] = w.container;
    if (w.on_stop) {
      x["on_stop"] = {{"fault", w.on_stop->fault}, {"hold_ms", w.on_stop->hold_ns / 1e6}, {"then", w.on_stop->then},
                      {"detail", w.on_stop->detail}};
      if (w.on_stop->stops > 1) x["on_stop"]["stops"] = w.on_stop->stops;
    }
    return x;
  };
  for (const auto& w : p.workers) j["workers"].push_back(worker_json(w));
  j["launchers"] = nlohmann::json::array();
  for (const auto& l : p.launchers) {
    j["launchers"].push_back({{"job", l.job}, {"kind", l.kind}, {"max_restarts", l.max_restarts}, {"run_id", l.run_id},
                              {"teardown_ms", l.teardown_ns / 1000000}});
  }
  j["gate_timeout_ms"] = p.gate_timeout_ns / 1000000;
  j["ghosts"] = nlohmann::json::array();
  for (const auto& g : p.ghosts) j["ghosts"].push_back({{"fault", g.fault}, {"worker", worker_json(g.worker)}});
  j["seeds"] = nlohmann::json::array();
  for (const auto& s : p.seeds) {
    j["seeds"].push_back({{"fault", s.fault}, {"where", s.where}, {"name", s.name}, {"bytes", s.content.size()},
                          {"size", s.size}, {"uid", s.uid}, {"held_by", s.held_by}, {"foreign", s.foreign},
                          {"release_at_ms", s.release_at_ns < 0 ? nlohmann::json() : nlohmann::json(s.release_at_ns / 1e6)}});
  }
  j["shm_size"] = p.shm_size;
  j["actions"] = nlohmann::json::array();
  for (const auto& a : p.actions) {
    nlohmann::json trigger = nullptr;
    if (!a.on_type.empty()) {
      trigger = {{"type", a.on_type}, {"op", a.on_op}, {"job", a.on_job}, {"rank", a.on_rank}, {"nth", a.on_nth}};
      if (a.on_worker >= 0) trigger["worker"] = a.on_worker;
      if (!a.on_value.is_null()) trigger["value"] = a.on_value;
    }
    j["actions"].push_back({{"at_ms", a.at_ns / 1e6},
                            {"after_event", trigger},
                            {"job", a.job},
                            {"rank", a.rank},
                            {"signal", a.signal},
                            {"fault", a.fault},
                            {"phase", a.phase},
                            {"tree", a.tree},
                            {"worker", a.worker},
                            {"launcher", a.launcher},
                            {"detail", a.detail}});
  }
  return j;
}

std::string expand_job(std::string s, int job) {
  for (std::size_t at; (at = s.find("{job}")) != std::string::npos;) s.replace(at, 5, std::to_string(job));
  return s;
}

TrialPlan unseeded_plan(const Scenario& s) {
  TrialPlan p;
  p.scenario = s.name;
  p.scenario_file = s.file;
  p.timeout_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(s.trial_timeout).count();
  p.final_cleanup = s.final_cleanup;
  p.gate_timeout_ns = std::min(std::chrono::duration_cast<std::chrono::nanoseconds>(s.start).count(), p.timeout_ns);
  p.settle_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(s.cleanup).count();
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    const JobSpec& js = s.jobs[j];
    nlohmann::json dirs = nlohmann::json::array();
    for (const auto& d : js.dirs) dirs.push_back({{"path", expand_job(d, static_cast<int>(j))}, {"remote", js.remote}});
    const Workload& w = js.workload;
    nlohmann::json ops = {{"acquire", w.acquire},
                          {"rounds", w.rounds},
                          {"round_jitter_ms", range_json(w.round_jitter)},
                          {"hold_ms", range_json(w.hold)},
                          {"release", w.release},
                          {"segments", w.segments},
                          {"clean_before", w.clean_before},
                          {"clean_after", w.clean_after},
                          {"start_jitter_ms", range_json(js.start_jitter)}};
    // Only when asked: subjects that know one dataset per process see the ops they always did.
    if (w.datasets > 1) ops["datasets"] = w.datasets;
    if (w.clean_between) ops["clean_between"] = true;
    if (w.barrier_liveness.count() > 0) ops["barrier_liveness_ms"] = w.barrier_liveness.count();
    if (w.retries > 0) ops["retries"] = w.retries;
    if (w.repeat_for.count() > 0) ops["repeat_for_ms"] = w.repeat_for.count();
    if (js.loader.workers > 0) {
      ops["loader"] = {{"workers", js.loader.workers},
                       {"start", js.loader.fork ? "fork" : "spawn"},
                       {"barrier", js.loader.enter_barrier ? "workers" : "rank"},
                       {"work_ms", range_json(js.loader.work)}};
    }
    if (js.launcher.present()) {
      LauncherPlan lp;
      lp.job = static_cast<int>(j);
      lp.kind = js.launcher.kind;
      lp.max_restarts = js.launcher.max_restarts;
      lp.teardown_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(js.launcher.teardown).count();
      p.launchers.push_back(lp);
    }
    for (int r = 0; r < js.ranks; ++r) {
      WorkerPlan wp;
      wp.job = static_cast<int>(j);
      wp.rank = r;
      wp.local_rank = r;
      wp.loader_workers = js.loader.workers;
      auto& e = wp.env;
      e["SHMSTRESS_ROLE"] = "rank";
      e["SHMSTRESS_JOB"] = std::to_string(j);
      // A launched rank keys its job as user code would (torchrun's run id),
      // so two jobs of one launcher configuration meet as they do for users.
      if (!js.launcher.present()) e["SHMSTRESS_JOB_KEY"] = "job" + std::to_string(j);
      e["SHMSTRESS_RANK"] = std::to_string(r);
      e["SHMSTRESS_WORLD_SIZE"] = std::to_string(js.ranks);
      e["SHMSTRESS_LOCAL_RANK"] = std::to_string(r);
      e["RANK"] = std::to_string(r);
      e["WORLD_SIZE"] = std::to_string(js.ranks);
      e["LOCAL_RANK"] = std::to_string(r);
      if (js.lws_mode == LwsMode::kSet) {
        e["SHMSTRESS_LOCAL_WORLD_SIZE"] = std::to_string(js.ranks);
      } else if (js.lws_mode == LwsMode::kWrong) {
        e["SHMSTRESS_LOCAL_WORLD_SIZE"] = std::to_string(r == 0 ? js.lws_wrong : js.ranks);
      }
      if (e.contains("SHMSTRESS_LOCAL_WORLD_SIZE")) e["LOCAL_WORLD_SIZE"] = e["SHMSTRESS_LOCAL_WORLD_SIZE"];
      e["SHMSTRESS_DIRS"] = dirs.dump();
      if (!js.root_suffix.empty()) e["SHMSTRESS_ROOT_SUFFIX"] = js.root_suffix;
      e["SHMSTRESS_OPS"] = ops.dump();
      e["SHMSTRESS_ACQUIRE_TIMEOUT_MS"] = std::to_string(s.acquire_deadline.count());
      e["SHMSTRESS_BARRIER_TIMEOUT_MS"] = std::to_string(s.barrier_deadline.count());
      p.workers.push_back(std::move(wp));
    }
  }
  return p;
}

void seed_trial(TrialPlan& p, const Scenario& s, std::uint64_t run_seed, int trial) {
  p.trial = trial;
  p.run_seed = run_seed;
  p.seed = derive_seed(run_seed, s.name, static_cast<std::uint64_t>(trial));
  for (auto& lp : p.launchers) {
    if (!s.jobs[static_cast<std::size_t>(lp.job)].launcher.default_run_id)
      lp.run_id = "job" + std::to_string(lp.job) + "-" + std::to_string(p.seed % 1000000007ULL);
  }
}

void seed_plan(TrialPlan& p, const Scenario& s, std::uint64_t run_seed, int trial) {
  seed_trial(p, s, run_seed, trial);
  for (auto& wp : p.workers) {
    wp.env["SHMSTRESS_SEED"] = std::to_string(derive_seed(
        p.seed, "worker",
        static_cast<std::uint64_t>(wp.job) * 1000 + static_cast<std::uint64_t>(wp.rank)));
  }
}

TrialPlan base_plan(const Scenario& s, std::uint64_t run_seed, int trial) {
  TrialPlan p = unseeded_plan(s);
  seed_plan(p, s, run_seed, trial);
  return p;
}

std::optional<std::uint64_t> tmpfs_size_bytes(const std::string& size) {
  const std::size_t digits = size.find_first_not_of("0123456789");
  if (size.empty() || digits == 0 || size.size() > 12 ||
      (digits != std::string::npos && digits + 1 != size.size())) {
    return std::nullopt;
  }
  std::uint64_t bytes = std::stoull(size.substr(0, digits));
  if (digits == std::string::npos) return bytes;
  switch (size.back()) {
    case 'k': return bytes << 10;
    case 'm': return bytes << 20;
    case 'g': return bytes << 30;
    default: return std::nullopt;
  }
}

const LauncherPlan* launcher_of(const TrialPlan& p, int job) {
  for (const auto& l : p.launchers) {
    if (l.job == job) return &l;
  }
  return nullptr;
}

}  // namespace harness
