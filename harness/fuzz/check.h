// A fuzz target's promises: one that does not hold is a finding, so the
// target aborts (libFuzzer then keeps the input), naming the promise.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>

inline void check(bool ok, const char* what) {
  if (!ok) {
    // The binary's name is the target's (baseline_fuzz, history_fuzz, ...).
    std::fprintf(stderr, "%s: broken promise: %s\n", program_invocation_short_name, what);
    std::abort();
  }
}
