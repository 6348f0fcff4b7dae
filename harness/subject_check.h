// subject-check: does a program speak docs/worker-protocol.md well enough to be
// a subject? It runs a small trial with it and checks the events are
// well-formed, every invoke is closed, the program stays inside the trial's
// names (nothing new in the machine's /dev/shm or /tmp), and that it exits
// promptly on SIGTERM. Each check is a line: PASS or FAIL with what was seen.
#pragma once

#include <string>
#include <vector>

namespace harness {

struct SubjectCheckLine {
  bool ok = false;
  std::string what;
  std::string detail;
};

// `exe` is this binary (for its supervisor); `command` the subject's argv.
std::vector<SubjectCheckLine> subject_check(const std::vector<std::string>& command, const std::string& exe);

}  // namespace harness
