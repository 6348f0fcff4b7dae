// Report formats: each a pure function of a finished (or in-progress) run.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/results.h"

namespace reports {

// summary.json (DESIGN.md §6-7).
nlohmann::json summary_json(const harness::RunResult& r);
// Writes summary.json atomically (temp + rename).
bool write_summary(const harness::RunResult& r, const std::string& path);

// Console: a live progress line (TTY) or periodic plain lines, and the final table.
struct Progress {
  int done = 0, planned = 0;  // planned < 0: unknown (duration mode)
  int violations = 0;
  double elapsed = 0, remaining = -1;
};
void console_progress(std::FILE* out, const Progress& p, bool tty, bool color);
void console_summary(std::FILE* out, const harness::RunResult& r, bool color);

}  // namespace reports
