#include "subjects.h"

#include <filesystem>
#include <set>
#include <toml++/toml.h>

namespace harness {
namespace fs = std::filesystem;

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
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      fs::path f = e.path() / "subject.toml";
      std::string name = e.path().filename().string();
      if (!fs::exists(f, ec) || seen.contains(name)) continue;
      try {
        toml::table t = toml::parse_file(f.string());
        SubjectInfo s;
        s.name = name;
        s.file = f.string();
        s.description = t["description"].value_or(std::string());
        s.command = split_words(t["command"].value_or(std::string()));
        if (auto r = t["shm_root"].value<std::string>()) s.shm_root = *r;
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
      *err = "subject exec: needs a command";
      return std::nullopt;
    }
    return s;
  }
  for (auto& s : list_subjects(search_from)) {
    if (s.name == spec) return s;
  }
  *err = "unknown subject '" + spec + "' (native, exec:CMD, or a name with subjects/<name>/subject.toml)";
  return std::nullopt;
}

}  // namespace harness
