// Every fault kind an injector can log has a rule in checkers/excuses.cc
// saying what it may excuse: a new injector cannot silently excuse
// everything, nor be silently unable to excuse what it causes.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "checkers/excuses.h"
#include "injector.h"

namespace harness {
namespace {

TEST(FaultRules, EveryInjectorKindHasAnExcuseRule) {
  std::set<std::string> ruled;
  for (const auto& r : checks::fault_rules()) ruled.insert(std::string(r.kind));
  ASSERT_FALSE(injector_registry().empty());
  for (const auto& inj : injector_registry()) {
    EXPECT_TRUE(ruled.contains(inj.kind))
        << "fault kind \"" << inj.kind
        << "\" has no rule in harness/checkers/excuses.cc: say what it can cause";
  }
}

TEST(FaultRules, EveryRuleSaysWhy) {
  for (const auto& r : checks::fault_rules()) EXPECT_FALSE(r.why.empty()) << r.kind;
}

}  // namespace
}  // namespace harness
