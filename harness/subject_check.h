// subject-check: does a program speak docs/worker-protocol.md well enough to be
// a subject? It runs a small trial with it and checks the events are
// well-formed, every invoke is closed, the program stays inside the trial's
// names (nothing new in the machine's /dev/shm or /tmp), and that it exits
// promptly on SIGTERM. Each check is a line: PASS or FAIL with what was seen.
//
// Everything it creates lives in one directory it makes for itself under
// /tmp (mkdtemp) and removes at the end; if that directory cannot be made it
// runs nothing and removes nothing (never /tmp itself).
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
// Empty, with *failure saying why, if the harness cannot check at all (its
// scratch directory cannot be made): the environment, exit 3.
std::vector<SubjectCheckLine> subject_check(const std::vector<std::string>& command, const std::string& exe,
                                            std::string* failure);

}  // namespace harness
