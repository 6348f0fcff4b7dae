#include "shrink.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <toml++/toml.h>

#include "files.h"
#include "stored.h"

namespace harness {
namespace fs = std::filesystem;

std::string ShrinkSize::to_string() const {
  return std::to_string(jobs) + " jobs, " + std::to_string(ranks) + " ranks, " + std::to_string(faults) + " faults, " +
         std::to_string(rounds) + " rounds";
}

namespace {

toml::array* jobs_of(toml::table& t) { return t["job"].as_array(); }
toml::array* faults_of(toml::table& t) { return t["fault"].as_array(); }

std::int64_t int_or(const toml::node_view<toml::node> n, std::int64_t def) { return n.value<std::int64_t>().value_or(def); }

// `count = N` jobs become N explicit tables, so indices in faults are stable.
void expand_counts(toml::table& t) {
  toml::array* jobs = jobs_of(t);
  if (!jobs) return;
  toml::array out;
  for (auto& j : *jobs) {
    toml::table* jt = j.as_table();
    if (!jt) continue;
    std::int64_t n = int_or((*jt)["count"], 1);
    jt->erase("count");
    for (std::int64_t i = 0; i < n; ++i) out.push_back(*jt);
  }
  t.insert_or_assign("job", std::move(out));
}

ShrinkSize size_of(toml::table& t) {
  ShrinkSize s;
  if (auto* jobs = jobs_of(t)) {
    for (auto& j : *jobs) {
      toml::table& jt = *j.as_table();
      ++s.jobs;
      s.ranks += static_cast<int>(int_or(jt["ranks"], 1));
      s.rounds += static_cast<int>(int_or(jt["workload"]["rounds"], 0)) * static_cast<int>(int_or(jt["ranks"], 1));
    }
  }
  if (auto* f = faults_of(t)) s.faults = static_cast<int>(f->size());
  return s;
}

using Reduction = std::function<bool(toml::table&)>;  // false: does not apply

std::vector<std::pair<std::string, Reduction>> reductions(toml::table& t) {
  std::vector<std::pair<std::string, Reduction>> out;
  int nfaults = faults_of(t) ? static_cast<int>(faults_of(t)->size()) : 0;
  int njobs = jobs_of(t) ? static_cast<int>(jobs_of(t)->size()) : 0;
  // The run's sometimes-on pauses are faults the file does not list: a
  // failure that needs none of them reproduces without them.
  out.push_back({"no sometimes-on pauses", [](toml::table& x) {
                   if (auto v = x["sometimes"].value<bool>(); v && !*v) return false;
                   x.insert_or_assign("sometimes", false);
                   return true;
                 }});
  for (int f = nfaults - 1; f >= 0; --f) {
    out.push_back({"drop fault " + std::to_string(f), [f](toml::table& x) {
                     faults_of(x)->erase(faults_of(x)->begin() + f);
                     return true;
                   }});
  }
  for (int k = njobs - 1; k >= 0 && njobs > 1; --k) {
    out.push_back({"drop job " + std::to_string(k), [k](toml::table& x) {
                     jobs_of(x)->erase(jobs_of(x)->begin() + k);
                     if (auto* fs = faults_of(x)) {  // faults aimed at it go; later jobs move down
                       for (std::size_t i = fs->size(); i-- > 0;) {
                         toml::table& ft = *(*fs)[i].as_table();
                         if (!ft.contains("job")) continue;
                         std::int64_t j = int_or(ft["job"], -1);
                         if (j == k) {
                           fs->erase(fs->begin() + static_cast<std::ptrdiff_t>(i));
                         } else if (j > k) {
                           ft.insert_or_assign("job", j - 1);
                         }
                       }
                     }
                     return true;
                   }});
  }
  for (int k = 0; k < njobs; ++k) {
    out.push_back({"one rank fewer in job " + std::to_string(k), [k](toml::table& x) {
                     toml::table& jt = *(*jobs_of(x))[static_cast<std::size_t>(k)].as_table();
                     std::int64_t ranks = int_or(jt["ranks"], 1);
                     if (ranks <= 1) return false;
                     jt.insert_or_assign("ranks", ranks - 1);
                     if (auto v = jt["local_world_size"].value<std::int64_t>(); v && *v == ranks - 1) return false;
                     if (auto* fs = faults_of(x)) {
                       for (std::size_t i = fs->size(); i-- > 0;) {
                         toml::table& ft = *(*fs)[i].as_table();
                         if (int_or(ft["job"], -1) == k && int_or(ft["rank"], -1) >= ranks - 1) {
                           fs->erase(fs->begin() + static_cast<std::ptrdiff_t>(i));
                         }
                       }
                     }
                     return true;
                   }});
    out.push_back({"half the rounds of job " + std::to_string(k), [k](toml::table& x) {
                     toml::table& jt = *(*jobs_of(x))[static_cast<std::size_t>(k)].as_table();
                     toml::table* w = jt["workload"].as_table();
                     std::int64_t rounds = w ? int_or((*w)["rounds"], 0) : 0;
                     if (rounds < 2) return false;
                     w->insert_or_assign("rounds", rounds / 2);
                     return true;
                   }});
    out.push_back({"plain workload for job " + std::to_string(k), [k](toml::table& x) {
                     toml::table& jt = *(*jobs_of(x))[static_cast<std::size_t>(k)].as_table();
                     bool changed = jt.erase("start_jitter") > 0;
                     if (toml::table* w = jt["workload"].as_table()) {
                       for (const char* key : {"segments", "clean_before", "clean_after", "clean_between", "hold", "round_jitter", "datasets"}) {
                         changed |= w->erase(key) > 0;
                       }
                     }
                     return changed;
                   }});
  }
  return out;
}

std::string render(const toml::table& t) {
  std::ostringstream os;
  os << t << "\n";
  return os.str();
}

}  // namespace

ShrinkResult shrink(const ShrinkOptions& opt) {
  ShrinkResult res;
  const fs::path dir = opt.trial_dir;
  auto bad = [&](std::string why) {
    res.error = std::move(why);
    res.bad_input = true;
    return res;
  };
  std::error_code ec;
  if (!fs::exists(dir / "schedule.json", ec) || !fs::exists(dir / "verdict.json", ec) ||
      !fs::exists(dir / "scenario.toml", ec)) {
    return bad("not a trial dir (needs schedule.json, verdict.json and scenario.toml): " +
               opt.trial_dir);
  }
  StoredError stored_err;
  const auto sched = load_schedule((dir / "schedule.json").string(), &stored_err);
  if (!sched) return bad(stored_err.to_string());
  const auto verdict = load_verdict((dir / "verdict.json").string(), &stored_err);
  if (!verdict) return bad(stored_err.to_string());
  // The reductions below edit the TOML tree as the validator left it (arrays
  // of tables, counts in range): a scenario.toml it refuses is not shrunk.
  ScenarioError scenario_err;
  const auto scenario = load_scenario((dir / "scenario.toml").string(), &scenario_err);
  if (!scenario) return bad(scenario_err.to_string());
  res.invariant = opt.invariant;
  if (!res.invariant.empty()) {
    bool known = false;
    for (const auto& c : checker_registry()) known |= c.invariant == res.invariant;
    if (!known) return bad("--invariant '" + res.invariant + "' is no invariant (see `shmstress list`)");
  }
  if (res.invariant.empty()) {
    for (const auto& c : verdict->checks) {
      if (c.verdict == Verdict::kInvalid && !c.excused) {
        res.invariant = c.invariant;
        break;
      }
    }
  }
  if (res.invariant.empty()) {
    res.error = "the trial violated no invariant: nothing to shrink";
    return res;
  }
  toml::table current;
  try {
    current = toml::parse(scenario->raw_toml);
  } catch (const std::exception& e) {
    return bad(std::string("cannot parse the trial's scenario.toml: ") + e.what());
  }
  expand_counts(current);
  current.erase("expect_reached");
  current.erase("trials");
  const std::uint64_t seed = sched->run_seed;
  const int trial = sched->trial;
  const std::string name = sched->scenario.value_or(scenario->name);
  current.insert_or_assign("name", name);
  res.original = size_of(current);

  const std::string work = (dir / "shrink").string();
  if (fs::create_directories(work, ec); ec) {
    res.error = "cannot create " + work + ": " + ec.message();
    res.harness_failed = true;
    return res;
  }
  // Does this scenario still fail the invariant? Up to `retries` runs of the same trial.
  auto still_fails = [&](const toml::table& t) -> bool {
    std::string file = work + "/" + name + ".toml";
    if (!write_file(file, render(t))) return false;
    std::vector<Scenario> sc;
    std::string err;
    if (!load_and_validate({file}, &sc, &err)) return false;
    for (int r = 0; r < opt.retries; ++r) {
      RunOptions ro = opt.run;
      ro.files = {file};
      ro.seed = seed;
      ro.only_trial = trial;
      ro.out_dir = work + "/run";
      fs::remove_all(ro.out_dir, ec);
      RunResult rr = run(sc, ro);
      for (const auto& [scenario, st] : rr.tally.scenarios()) {
        if (auto c = st.invariants.find(res.invariant); c != st.invariants.end() && c->second.invalid > 0) return true;
      }
      if (rr.interrupted) return false;
    }
    return false;
  };
  if (!still_fails(current)) {
    res.error = res.invariant + " did not fail again in " + std::to_string(opt.retries) +
                " runs of the original trial: not reproducible enough to shrink";
    fs::remove_all(work, ec);
    return res;
  }
  for (bool progress = true; progress && res.candidates < opt.budget;) {
    progress = false;
    for (auto& [what, reduce] : reductions(current)) {
      if (res.candidates >= opt.budget) break;
      toml::table candidate = current;
      if (!reduce(candidate)) continue;
      ++res.candidates;
      if (still_fails(candidate)) {
        current = std::move(candidate);
        ++res.kept;
        progress = true;
        break;  // the reductions' indices changed: enumerate again
      }
    }
  }
  res.minimal = size_of(current);
  current.insert_or_assign("description", "Minimal reproduction of " + res.invariant + ", shrunk by shmstress from " +
                                              opt.trial_dir + " (" + res.original.to_string() + ").");
  res.minimal_file = (dir / "minimal.toml").string();
  if (!write_file(res.minimal_file, "# Shrunk by `shmstress shrink` from " + opt.trial_dir + " (" +
                                        res.original.to_string() + ")\n# to " + res.minimal.to_string() +
                                        "; still violates " + res.invariant + ".\n" + render(current))) {
    res.error = "cannot write " + res.minimal_file;
    res.harness_failed = true;
    return res;
  }
  res.reproduce = opt.run.invocation + " run " + res.minimal_file + opt.run.reproduce_flags + " --seed " +
                  std::to_string(seed) + " --trial " + std::to_string(trial);
  fs::remove_all(work, ec);
  res.ok = true;
  return res;
}

std::vector<Fingerprint> trial_fingerprints(const std::string& trial_dir, const std::string& invariant) {
  // Stored files a user may have edited: decoded by type (stored.h), and a
  // file that does not decode gives no fingerprint rather than an exception.
  auto v = load_verdict(trial_dir + "/verdict.json", nullptr);
  auto sched = load_schedule(trial_dir + "/schedule.json", nullptr);
  if (!v) return {};
  const std::string scenario = sched && sched->scenario ? *sched->scenario : "";
  for (const auto& c : v->checks) {
    if (c.invariant != invariant || c.verdict != Verdict::kInvalid) continue;
    CheckResult check;
    check.invariant = invariant;
    check.verdict = Verdict::kInvalid;
    check.problems = c.problems;
    return violation_fingerprints(scenario, check);
  }
  return {};
}

std::expected<std::string, std::string> save_regression(const ShrinkResult& r, const std::string& trial_dir,
                                                        const std::vector<Fingerprint>& fingerprints,
                                                        const std::string& dir) {
  if (!r.ok) return std::unexpected("nothing was shrunk");
  if (fingerprints.empty()) return std::unexpected("the trial's verdict.json names no problem of " + r.invariant);
  toml::table t, original;
  try {
    t = toml::parse(read_file(r.minimal_file));
    original = toml::parse(read_file(trial_dir + "/scenario.toml"));
  } catch (const std::exception& e) {
    return std::unexpected(std::string("cannot read the scenarios back: ") + e.what());
  }
  auto sched = load_schedule(trial_dir + "/schedule.json", nullptr);
  const std::string scenario = sched && sched->scenario ? *sched->scenario : "scenario";
  const Fingerprint& fp = fingerprints.front();
  const std::string hash = fp.id.substr(fp.id.rfind('/') + 1);
  const std::string name = "regress-" + scenario + "-" + hash;
  std::string ids;
  for (const auto& f : fingerprints) ids += (ids.empty() ? "" : ", ") + f.id;
  t.insert_or_assign("name", name);
  t.insert_or_assign(
      "description",
      "Regression for " + ids + ": " + r.invariant + " failed in " + scenario + " with \"" + fp.shape +
          "\". Shrunk by `shmstress shrink` from " + trial_dir + " (" + r.original.to_string() + ") to " +
          r.minimal.to_string() + "; it must hold against a fixed subject. Reproduce the failure with the flawed subject: " + r.reproduce);
  // The catalog checks what the original scenario checked, as often.
  for (const char* key : {"invariants", "trials"}) {
    if (auto* v = original.get(key)) {
      t.insert_or_assign(key, *v);
    } else {
      t.erase(key);
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string file = (fs::path(dir) / (name + ".toml")).string();
  std::ostringstream os;
  os << "# Regression scenario for " << ids << "\n"
     << "# (" << r.invariant << " in " << scenario << "), written by `shmstress shrink --save`.\n"
     << t << "\n";
  if (!write_file(file, os.str())) return std::unexpected("cannot write " + file);
  std::vector<Scenario> check;
  std::string err;
  if (!load_and_validate({file}, &check, &err)) {
    fs::remove(file, ec);
    return std::unexpected("the regression scenario does not load: " + err);
  }
  return file;
}

}  // namespace harness
