// Whole small text files the harness process reads and writes (trial dirs:
// history.jsonl, scenario.toml, schedule.json). Not for reports, which are
// written atomically (reports/files.cc), nor for what workers append to.
#pragma once

#include <string>

namespace harness {

// The file's contents; empty if it cannot be read.
std::string read_file(const std::string& path);
// Creates or truncates; false if it cannot be written.
bool write_file(const std::string& path, const std::string& text);

}  // namespace harness
