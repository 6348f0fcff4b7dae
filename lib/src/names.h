// The names a namespace owns outside its registry: "<root><prefix:06>_<kind>"
// segments in /dev/shm and lock files in the lock dir. Listing is by directory
// scan, so a gap in the prefixes never hides anything (the original walk
// stopped at the first gap).
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "shmcoord/namespace.h"

namespace shmcoord {

struct OwnedEntry {
  std::string name;  // shm: "/<root>..." ; lock: full path
  uid_t uid = 0;
  bool is_lock = false;
};

// Parses "<prefix:06>_<kind>" from a suffix; -1 if it is not of that form.
int parse_prefix(std::string_view suffix);

// Every shm segment and lock file under the namespace root, grouped by prefix
// (-1 for names that carry none). The namespace's own objects, the init lock
// and the leases file, are not listed. With `want`, only names whose prefix it
// accepts are listed (and lstat'ed): one directory scan either way.
std::map<int, std::vector<OwnedEntry>> list_owned(const Namespace& ns, const std::function<bool(int)>& want = {});

// Removes one entry if it is ours (uid) and, for a lock file, not held by
// anyone (flock LOCK_NB taken, then unlinked while held). Returns why it was
// kept, or an empty string if it was removed (or already gone).
std::string remove_entry(const OwnedEntry& e);

}  // namespace shmcoord
