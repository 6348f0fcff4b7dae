// Named subjects: each is one file, subjects/<name>/subject.toml, with
//   description = "..."
//   command = "/usr/bin/python3 subjects/streaming/adapter.py"   # argv, split on spaces
//   shm_root = ""        # optional: the name root the subject really uses
//                        # (the real Streaming package ignores SHMSTRESS_ROOT)
//   shm_size = "4g"      # optional: the trial's /dev/shm tmpfs size (default
//                        # 256m; joblib uses /dev/shm only with 2 GB free)
// A scenario names one with `subject = "streaming"`; `--subject NAME` does too.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace harness {

struct SubjectInfo {
  std::string name;
  std::string description;
  std::vector<std::string> command;  // empty: the native worker
  std::optional<std::string> shm_root;
  std::string file;
  std::string shm_size;  // "": the supervisor's default (checked by resolve_subject)
};

// Looks in ./subjects and in <dir of each search path>/subjects, upwards.
std::vector<SubjectInfo> list_subjects(const std::vector<std::string>& search_from);
// "native", "exec:CMD" or a name. nullopt with *err for an unknown name.
std::optional<SubjectInfo> resolve_subject(const std::string& spec, const std::vector<std::string>& search_from,
                                           std::string* err);
std::vector<std::string> split_words(const std::string& cmd);
// A tmpfs size the supervisor may mount: digits with an optional k, m or g,
// between 4k and 64g ("4g", "512m").
bool valid_tmpfs_size(const std::string& size);

// Workers start in their own dir in the trial (docs/worker-protocol.md), so a
// command's relative paths are made absolute once, here: the program, and
// every argument that names an existing file or dir, against the first of
// `bases` where it exists (where shmstress was started, then, for a named
// subject, the dir holding its subjects/). Other arguments stay as written.
std::vector<std::string> absolute_command(std::vector<std::string> argv, const std::vector<std::string>& bases);

// Whether the supervisor's execve(argv[0], ...) can start this program: it
// does not search PATH, so argv[0] is a path (relative to the harness's
// working directory); it must be a regular, executable file that is an ELF
// binary or a "#!" script whose interpreter is there too. False with *why
// (naming the program, and for a bare name found on PATH, the path to write)
// otherwise: checked once before the first trial, not found out by every one.
bool check_program(const std::vector<std::string>& argv, std::string* why);

}  // namespace harness
