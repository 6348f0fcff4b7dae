// Where a set of cooperating processes keeps its names. Every shm segment is
// "/<root><suffix>" and every lock file "<lock_dir>/<root><suffix>"; processes
// only see each other when they agree on the Namespace, so tests and trials that
// use distinct roots never interfere. Nothing outside the root is ever touched,
// including by cleanup. Besides the registry and the jobs' "<prefix:06>_*"
// names, a namespace has two objects of its own in /dev/shm: "<root>init.lock"
// and "<root>leases" (docs/failpoints.md lists who creates and removes each).
//
// Telling namespaces apart (validate()): names are found by listing /dev/shm
// and the lock dir and matching the root as a string prefix, so one root may
// be a prefix of another ("a." of "a.b."). A root therefore ends with '.', its
// components are non-empty, and suffixes never contain '.' (only the
// namespace's own "init.lock" does): seen from "a.", every name of "a.b." has
// a dot in its suffix and is never "a."'s. A root may not end in "init." (its
// parent root's "init.lock" would be one of its names). Barrier suffixes and
// the kinds after "<prefix:06>_" are [A-Za-z0-9_-]+ (valid_suffix()); a name
// with a dot in its suffix is never listed, cleaned or removed.
//
// The lock dir holds lock files only: it may not be /dev/shm itself (by
// device and inode, so a symlink or bind mount of it is refused too), or every
// shm object would also be a "lock file" that cleanup flock-tests and removes.
// It need not exist: a lock dir that does not exist holds no lock files.
#pragma once

#include <filesystem>
#include <string>

#include "shmcoord/error.h"

namespace shmcoord {

struct Namespace {
  std::string root = "shmcoord.";            // ([A-Za-z0-9_-]+\.)+, at most 64 bytes, last component not "init"
  std::filesystem::path lock_dir = "/tmp";   // absolute, not the shm dir

  // Default: root "shmcoord.<euid>." (users never share a registry), lock dir
  // $TMPDIR or /tmp; SHMCOORD_ROOT and SHMCOORD_LOCK_DIR override.
  static Namespace from_env();

  // kInvalidArgument naming what is wrong with the root or the lock dir.
  Status validate() const;
  // A suffix this namespace may create: 1..128 bytes of [A-Za-z0-9_-], and
  // not one of the namespace's own objects ("registry", "leases").
  static bool valid_suffix(std::string_view suffix);
  std::string shm_name(std::string_view suffix) const;  // "/<root><suffix>"
  std::filesystem::path lock_path(std::string_view suffix) const;
  static std::string prefix_suffix(int prefix, std::string_view kind);  // "000003_barrier"
};

// The directory POSIX shm lives in on Linux; cleanup lists it.
inline constexpr const char* kShmDir = "/dev/shm";

}  // namespace shmcoord
