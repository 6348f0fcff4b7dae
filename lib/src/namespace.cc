#include "shmcoord/namespace.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace shmcoord {

Namespace Namespace::from_env() {
  Namespace ns;
  if (const char* r = std::getenv("SHMCOORD_ROOT"); r && *r) {
    ns.root = r;
  } else {
    ns.root = "shmcoord." + std::to_string(geteuid()) + ".";
  }
  if (const char* d = std::getenv("SHMCOORD_LOCK_DIR"); d && *d) {
    ns.lock_dir = d;
  } else if (const char* t = std::getenv("TMPDIR"); t && *t) {
    ns.lock_dir = t;
  }
  return ns;
}

namespace {

bool suffix_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

}  // namespace

Status Namespace::validate() const {
  if (root.empty() || root.size() > 64) {
    return fail(Code::kInvalidArgument, "namespace root must be 1..64 bytes, got '" + root + "'");
  }
  for (char c : root) {
    if (!suffix_char(c) && c != '.') {
      return fail(Code::kInvalidArgument, "namespace root has a character outside [A-Za-z0-9._-]: '" + root + "'");
    }
  }
  if (root.back() != '.') {
    return fail(Code::kInvalidArgument, "namespace root must end with '.', got '" + root +
                                            "' (without it one root can be a prefix of another's names, as "
                                            "'exp1' of 'exp10registry')");
  }
  std::string_view last;
  for (std::size_t start = 0; start < root.size();) {
    const std::size_t dot = root.find('.', start);
    if (dot == start) return fail(Code::kInvalidArgument, "namespace root has an empty component: '" + root + "'");
    last = std::string_view(root).substr(start, dot - start);
    start = dot + 1;
  }
  if (last == "init") {
    return fail(Code::kInvalidArgument, "namespace root may not end in 'init.': '" + root +
                                            "' would own the init lock of the root it extends");
  }
  if (lock_dir.empty() || !lock_dir.is_absolute()) {
    return fail(Code::kInvalidArgument, "lock dir must be an absolute path, got '" + lock_dir.string() + "'");
  }
  struct stat mine{}, shm{};
  if (::stat(lock_dir.c_str(), &mine) == 0 && ::stat(kShmDir, &shm) == 0 && mine.st_dev == shm.st_dev &&
      mine.st_ino == shm.st_ino) {
    return fail(Code::kInvalidArgument, "lock dir '" + lock_dir.string() + "' is " + kShmDir +
                                            ": every shm object there would count as a lock file");
  }
  return {};
}

bool Namespace::valid_suffix(std::string_view suffix) {
  if (suffix.empty() || suffix.size() > 128 || suffix == "registry" || suffix == "leases") return false;
  for (char c : suffix) {
    if (!suffix_char(c)) return false;
  }
  return true;
}

std::string Namespace::shm_name(std::string_view suffix) const {
  std::string s = "/" + root;
  s += suffix;
  return s;
}

std::filesystem::path Namespace::lock_path(std::string_view suffix) const {
  std::string s = root;
  s += suffix;
  return lock_dir / s;
}

std::string Namespace::prefix_suffix(int prefix, std::string_view kind) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06d_", prefix);
  std::string s(buf);
  s += kind;
  return s;
}

}  // namespace shmcoord
