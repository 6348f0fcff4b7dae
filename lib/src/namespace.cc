#include "shmcoord/namespace.h"

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

Status Namespace::validate() const {
  if (root.empty() || root.size() > 64) {
    return fail(Code::kInvalidArgument, "namespace root must be 1..64 bytes, got '" + root + "'");
  }
  for (char c : root) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return fail(Code::kInvalidArgument, "namespace root has a character outside [A-Za-z0-9._-]: '" + root + "'");
  }
  if (lock_dir.empty() || !lock_dir.is_absolute()) {
    return fail(Code::kInvalidArgument, "lock dir must be an absolute path, got '" + lock_dir.string() + "'");
  }
  return {};
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
