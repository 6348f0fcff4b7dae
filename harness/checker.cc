#include "checker.h"

#include <algorithm>
#include <exception>

namespace harness {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kValid:
      return "valid";
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kInvalid:
      return "invalid";
  }
  return "unknown";
}

std::vector<CheckerInfo>& checker_registry() {
  // Function-local so registrations from other translation units' static
  // initialisers never see it unconstructed.
  static std::vector<CheckerInfo> registry;
  return registry;
}

namespace {

// A checker that throws has not decided anything: its invariant is unknown
// for this trial, and the reason is the problem line.
CheckResult run_one(const CheckerInfo& info, const History& h) {
  CheckResult r;
  try {
    r = info.check(h);
  } catch (const std::exception& e) {
    r = CheckResult{};
    r.verdict = Verdict::kUnknown;
    r.problems.push_back(std::string("checker failed: ") + e.what());
  } catch (...) {
    r = CheckResult{};
    r.verdict = Verdict::kUnknown;
    r.problems.push_back("checker failed with a non-standard exception");
  }
  r.invariant = info.invariant;
  return r;
}

}  // namespace

std::vector<CheckResult> run_checkers(const History& h, const std::vector<std::string>& only) {
  // Results come in invariant order whatever the link order of the checkers was.
  std::vector<const CheckerInfo*> checkers;
  for (const CheckerInfo& info : checker_registry()) checkers.push_back(&info);
  std::sort(checkers.begin(), checkers.end(),
            [](const CheckerInfo* a, const CheckerInfo* b) { return a->invariant < b->invariant; });

  std::vector<CheckResult> results;
  for (const CheckerInfo* info : checkers) {
    if (!only.empty() && std::find(only.begin(), only.end(), info->invariant) == only.end())
      continue;
    if (h.cut_t && !info->judges_cuts) {
      CheckResult r;
      r.invariant = info->invariant;
      r.excused = kNotJudgedAtCut;
      results.push_back(std::move(r));
      continue;
    }
    results.push_back(run_one(*info, h));
  }
  // An invariant asked for by name that nobody checks was not shown to hold.
  for (const std::string& name : only) {
    bool known = std::any_of(checkers.begin(), checkers.end(),
                             [&](const CheckerInfo* c) { return c->invariant == name; });
    if (!known) {
      CheckResult r;
      r.invariant = name;
      r.verdict = Verdict::kUnknown;
      r.problems.push_back("no checker is registered for invariant \"" + name + "\"");
      results.push_back(std::move(r));
    }
  }
  return results;
}

}  // namespace harness
