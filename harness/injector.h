// A fault kind. Each lives in one file in injectors/ and registers with one
// line: SHMSTRESS_REGISTER_INJECTOR("kind", "summary", plan_fn). An injector
// only *plans*: from its [[fault]] params, the trial's seeded rng and the trial
// index it adds timed actions and per-worker environment to the TrialPlan. It
// reads no worker environment but what it or an earlier fault of the trial
// set: validation plans each fault hundreds of times into plans without the
// workers' protocol variables and seeds (validation_plan, seed_trial). The
// supervisor carries the actions out, logs each as a fault event, and heals
// (SIGCONT to every worker, then teardown) whatever happens, so a plan is
// replayable and nothing an injector does outlives the trial.
#pragma once

#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "plan.h"
#include "scenario.h"

namespace harness {

using Rng = std::mt19937_64;

struct InjectorInfo {
  std::string kind;
  std::string summary;
  // Returns an error message (the caller prefixes file:line) or nullopt.
  std::function<std::optional<std::string>(const FaultSpec&, const Scenario&, Rng&, TrialPlan&)> plan;
};

std::vector<InjectorInfo>& injector_registry();
const InjectorInfo* find_injector(const std::string& kind);

struct InjectorRegistration {
  explicit InjectorRegistration(InjectorInfo info) { injector_registry().push_back(std::move(info)); }
};

#define SHMSTRESS_INJ_CONCAT2(a, b) a##b
#define SHMSTRESS_INJ_CONCAT(a, b) SHMSTRESS_INJ_CONCAT2(a, b)
#define SHMSTRESS_REGISTER_INJECTOR(...) \
  static ::harness::InjectorRegistration SHMSTRESS_INJ_CONCAT(injector_reg_, __LINE__)(::harness::InjectorInfo{__VA_ARGS__})

// Typed parameter accessors. Each leaves the default in *out when the key is
// absent and returns nullopt; a value of the wrong TOML type, out of range or
// not among the allowed words is an error that quotes the key ('limit'), so
// the caller can point at that key's line. None of them throws or aborts.
std::optional<std::string> param_int(const FaultSpec& f, const std::string& key, std::int64_t def, std::int64_t lo,
                                     std::int64_t hi, std::int64_t* out);
std::optional<std::string> param_int(const FaultSpec& f, const std::string& key, int def, int lo, int hi, int* out);
std::optional<std::string> param_double(const FaultSpec& f, const std::string& key, double def, double lo_excl,
                                        double hi_incl, double* out);
// A share (of trials, of draws) in [0, 1]: 0 turns a draw off, 1 always on.
std::optional<std::string> param_share(const FaultSpec& f, const std::string& key, double def,
                                       double* out);
std::optional<std::string> param_bool(const FaultSpec& f, const std::string& key, bool def, bool* out);
// `allowed` empty: any non-empty string.
std::optional<std::string> param_string(const FaultSpec& f, const std::string& key, const std::string& def,
                                        std::initializer_list<const char*> allowed, std::string* out);
// A string or a non-empty list of strings.
std::optional<std::string> param_strings(const FaultSpec& f, const std::string& key,
                                         const std::vector<std::string>& def, std::vector<std::string>* out);
// A non-empty list of integers in [lo, hi].
std::optional<std::string> param_ints(const FaultSpec& f, const std::string& key, const std::vector<int>& def, int lo,
                                      int hi, std::vector<int>* out);
// "EACCES", "EPERM", ..., "random" (one of EACCES/EPERM/EIO, drawn with the
// rng), or an errno number 1..4095 (integer or digits).
std::optional<std::string> param_errno(const FaultSpec& f, const std::string& key, const std::string& def, Rng& rng,
                                       int* out);
// A failpoint the native subject knows (shmcoord::failpoint's list), or an error.
std::optional<std::string> check_failpoint(const std::string& key, const std::string& point);
// Every window point of shmcoord (a step inside a multi-step critical
// section), in the library's order.
std::vector<std::string> window_points();

// Where a process stops or dies for a fault at a failpoint: `point` (a name, a
// list, or "*" for every window point) and either `nth` (the n-th pass,
// default 1) or `enumerate = K`, with which trial i takes the i-th pair of
// (point, k) over every point x k in 1..K (points varying fastest), so
// |points| x K trials visit each once.
// *pass: how many times the whole list has been visited before this trial
// (trial / pairs), for cycling targets.
std::optional<std::string> pick_point(const FaultSpec& f, int trial, const std::string& def_point, std::string* point,
                                      int* nth, int* pass = nullptr);

// Which rank a point fault aims at: `job`/`rank` if given, else by `target`:
// "random" (seeded, the default) or "cycle" (pass p of the point list takes
// the p-th rank of the trial, so |points| x ranks trials visit every pair).
std::optional<std::string> pick_point_target(const FaultSpec& f, const Scenario& s, Rng& rng, int pass, int* job,
                                             int* rank);

// Helpers shared by injectors: parse "10-200ms" style params and pick targets.
std::optional<std::string> param_range(const FaultSpec& f, const std::string& key, MsRange def, MsRange* out);
std::int64_t pick_ns(Rng& rng, MsRange r);
// Target (job, rank): from params "job"/"rank" if present, else seeded random. Returns error text.
std::optional<std::string> pick_target(const FaultSpec& f, const Scenario& s, Rng& rng, int* job, int* rank);
// Which process of the picked (job, rank) a signal goes to: params `worker`
// (its loader worker #n: the job must have [job.loader] workers > n) or
// `target = "launcher"` (the job's launcher, whose [job.launcher] must be set;
// then *rank is -1). Leaves the action aimed at the rank itself otherwise.
std::optional<std::string> pick_process(const FaultSpec& f, const Scenario& s, int job, Action* a);
// `count` distinct (job, rank) targets, each picked like pick_target.
std::optional<std::string> pick_distinct_targets(const FaultSpec& f, const Scenario& s, Rng& rng, int count,
                                                 std::vector<std::pair<int, int>>* out);
// The workers a fault aims at: params "job" (else all jobs) and "rank" (else
// every rank of the chosen jobs); with "random_rank = true" one seeded rank.
std::optional<std::string> pick_workers(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p,
                                        std::vector<WorkerPlan*>* out);
// Checks that params hold only the given keys (besides "kind").
std::optional<std::string> only_keys(const FaultSpec& f, std::initializer_list<const char*> keys);

}  // namespace harness
