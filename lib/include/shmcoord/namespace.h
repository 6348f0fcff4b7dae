// Where a set of cooperating processes keeps its names. Every shm segment is
// "/<root><suffix>" and every lock file "<lock_dir>/<root><suffix>"; processes
// only see each other when they agree on the Namespace, so tests and trials that
// use distinct roots never interfere. Nothing outside the root is ever touched,
// including by cleanup. Besides the registry and the jobs' "<prefix:06>_*"
// names, a namespace has two objects of its own in /dev/shm: "<root>init.lock"
// and "<root>leases" (docs/failpoints.md lists who creates and removes each).
#pragma once

#include <filesystem>
#include <string>

#include "shmcoord/error.h"

namespace shmcoord {

struct Namespace {
  std::string root = "shmcoord.";            // [A-Za-z0-9._-]+, at most 64 bytes
  std::filesystem::path lock_dir = "/tmp";   // must exist

  // Default: root "shmcoord.<euid>." (users never share a registry), lock dir
  // $TMPDIR or /tmp; SHMCOORD_ROOT and SHMCOORD_LOCK_DIR override.
  static Namespace from_env();

  Status validate() const;
  std::string shm_name(std::string_view suffix) const;  // "/<root><suffix>"
  std::filesystem::path lock_path(std::string_view suffix) const;
  static std::string prefix_suffix(int prefix, std::string_view kind);  // "000003_barrier"
};

// The directory POSIX shm lives in on Linux; cleanup lists it.
inline constexpr const char* kShmDir = "/dev/shm";

}  // namespace shmcoord
