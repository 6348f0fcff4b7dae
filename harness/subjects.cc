#include "subjects.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string_view>
#include <toml++/toml.h>

#include "files.h"
#include "plan.h"

namespace harness {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t i = 0;
  for (std::size_t j; (j = s.find(sep, i)) != std::string::npos; i = j + 1) out.push_back(s.substr(i, j - i));
  out.push_back(s.substr(i));
  return out;
}

}  // namespace

bool valid_tmpfs_size(const std::string& size) {
  const auto bytes = tmpfs_size_bytes(size);
  return bytes && *bytes >= 4096 && *bytes <= (64ULL << 30);
}

std::vector<std::string> split_words(const std::string& cmd) {
  std::vector<std::string> argv;
  for (std::size_t i = 0; i < cmd.size();) {
    std::size_t j = cmd.find(' ', i);
    if (j == std::string::npos) j = cmd.size();
    if (j > i) argv.push_back(cmd.substr(i, j - i));
    i = j + 1;
  }
  return argv;
}

std::vector<std::string> absolute_command(std::vector<std::string> argv, const std::vector<std::string>& bases) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string& a = argv[i];
    if (a.empty() || a.front() == '/' || (i == 0 && a.find('/') == std::string::npos)) continue;
    for (const auto& base : bases) {
      std::error_code ec;
      const fs::path p = fs::path(base) / a;
      if (fs::exists(p, ec)) {
        a = fs::absolute(p, ec).lexically_normal().string();
        break;
      }
    }
  }
  return argv;
}

namespace {

// execve's view of one file: a regular, executable file, or why not.
bool executable_file(const std::string& path, std::string* why) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    *why = path + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = path + ": not a regular file";
    return false;
  }
  if (::access(path.c_str(), X_OK) != 0) {
    *why = path + ": not executable (" + std::strerror(errno) + ")";
    return false;
  }
  return true;
}

// Where a bare name would be found on PATH (execvp's view), for a hint.
std::optional<std::string> on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  for (const auto& dir : split_on(path, ':')) {
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    std::string ignored;
    if (executable_file(candidate, &ignored)) return candidate;
  }
  return std::nullopt;
}

}  // namespace

bool check_program(const std::vector<std::string>& argv, std::string* why) {
  if (argv.empty() || argv.front().empty()) {
    *why = "no program to run";
    return false;
  }
  const std::string& prog = argv.front();
  if (prog.find('\0') != std::string::npos) {
    *why = "the program's path holds a NUL byte";
    return false;
  }
  if (!executable_file(prog, why)) {
    if (prog.find('/') == std::string::npos) {
      if (auto found = on_path(prog)) {
        *why = "'" + prog + "' is not a path to a program: workers are started with execve, "
               "which does not search PATH; write " + *found;
      }
    }
    return false;
  }
  // What execve will do with it: an ELF binary, or a "#!" script whose
  // interpreter must be there too (else it fails with ENOENT at every trial).
  char head[256] = {};
  ssize_t n = -1;
  if (int fd = ::open(prog.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK); fd >= 0) {
    n = ::read(fd, head, sizeof head - 1);
    ::close(fd);
  }
  if (n < 0) return true;  // unreadable but executable (mode 0111): execve will tell
  const std::string_view h(head, static_cast<std::size_t>(n));
  if (h.starts_with("\x7f" "ELF")) return true;
  if (h.starts_with("#!")) {
    std::string_view rest = h.substr(2);
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    const std::string interpreter(rest.substr(0, rest.find_first_of(" \t\n")));
    if (interpreter.empty()) {
      *why = prog + ": its \"#!\" line names no interpreter";
      return false;
    }
    if (!executable_file(interpreter, why)) {
      *why = prog + ": its interpreter " + *why;
      return false;
    }
    return true;
  }
  *why = prog + ": neither an ELF binary nor a \"#!\" script (execve would fail: Exec format error)";
  return false;
}

namespace {

std::vector<fs::path> subject_dirs(const std::vector<std::string>& search_from) {
  std::vector<fs::path> dirs = {fs::current_path() / "subjects"};
  for (const auto& p : search_from) {
    std::error_code ec;
    for (fs::path d = fs::absolute(p, ec).parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path()) {
      if (fs::is_directory(d / "subjects", ec)) dirs.push_back(d / "subjects");
    }
  }
  return dirs;
}

}  // namespace

std::vector<SubjectInfo> list_subjects(const std::vector<std::string>& search_from) {
  std::vector<SubjectInfo> out;
  std::set<std::string> seen;
  for (const auto& dir : subject_dirs(search_from)) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const fs::directory_entry& e = *it;
      fs::path f = e.path() / "subject.toml";
      std::string name = e.path().filename().string();
      std::error_code exists_ec;
      if (!fs::exists(f, exists_ec) || seen.contains(name)) continue;
      auto text = read_regular_file(f.string(), kMaxUserFileBytes, nullptr);
      if (!text) continue;
      try {
        toml::table t = toml::parse(*text, f.string());
        SubjectInfo s;
        s.name = name;
        s.file = f.string();
        s.description = t["description"].value_or(std::string());
        s.command = split_words(t["command"].value_or(std::string()));
        if (auto r = t["shm_root"].value<std::string>()) s.shm_root = *r;
        if (auto z = t["shm_size"]) s.shm_size = z.value<std::string>().value_or("<not a string>");
        if (s.command.empty()) continue;
        seen.insert(name);
        out.push_back(std::move(s));
      } catch (...) {
      }
    }
  }
  return out;
}

std::optional<SubjectInfo> resolve_subject(const std::string& spec, const std::vector<std::string>& search_from,
                                           std::string* err) {
  if (spec.empty() || spec == "native") return SubjectInfo{"native", "shmcoord (lib/)", {}, std::nullopt, ""};
  if (spec.rfind("exec:", 0) == 0) {
    SubjectInfo s{spec, "", split_words(spec.substr(5)), std::nullopt, ""};
    if (s.command.empty()) {
      *err = "subject exec: needs a command, e.g. exec:/usr/bin/python3 adapter.py";
      return std::nullopt;
    }
    if (!check_program(s.command, err)) {
      *err = "subject '" + spec + "': " + *err;
      return std::nullopt;
    }
    s.command = absolute_command(std::move(s.command), {fs::current_path().string()});
    return s;
  }
  for (auto& s : list_subjects(search_from)) {
    if (s.name != spec) continue;
    if (!check_program(s.command, err)) {
      *err = "subject '" + spec + "' (" + s.file + "): " + *err;
      return std::nullopt;
    }
    if (!s.shm_size.empty() && !valid_tmpfs_size(s.shm_size)) {
      *err = "subject '" + spec + "' (" + s.file + "): shm_size \"" + s.shm_size +
             "\" is not a tmpfs size like \"4g\" or \"512m\" (4k..64g)";
      return std::nullopt;
    }
    // subjects/<name>/subject.toml: its command's paths are relative to
    // where shmstress runs, or else to the dir holding subjects/.
    s.command = absolute_command(
        std::move(s.command),
        {fs::current_path().string(), fs::path(s.file).parent_path().parent_path().parent_path().string()});
    return s;
  }
  *err = "unknown subject '" + spec + "' (native, exec:CMD, or a name with subjects/<name>/subject.toml)";
  return std::nullopt;
}

}  // namespace harness
