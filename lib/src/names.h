// The names a namespace owns outside its registry: "<root><prefix:06>_<kind>"
// segments in /dev/shm and lock files in the lock dir. Listing is by directory
// scan, so a gap in the prefixes never hides anything (the original walk
// stopped at the first gap). A name whose suffix holds a '.' is never ours
// (it belongs to a root nested in ours: namespace.h), so it is never listed.
// A listing that fails (EMFILE on opendir, say) is an error, never an empty
// list: callers decide nothing about names they could not see.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "shmcoord/error.h"
#include "shmcoord/namespace.h"

namespace shmcoord {

struct OwnedEntry {
  std::string name;  // shm: "/<root>..." ; lock: full path
  uid_t uid = 0;
  bool is_lock = false;
};

// Parses "<prefix:06>_<kind>" from a suffix; -1 if it is not of that form.
int parse_prefix(std::string_view suffix);

using Owned = std::map<int, std::vector<OwnedEntry>>;

// Every shm segment and lock file under the namespace root, grouped by prefix
// (-1 for names that carry none). The namespace's own objects, the init lock
// and the leases file, are not listed. With `want`, only names whose prefix it
// accepts are listed (and lstat'ed): one directory scan either way. A lock dir
// that does not exist holds nothing; any other failure to list is an error.
Result<Owned> list_owned(const Namespace& ns, const std::function<bool(int)>& want = {});

// Removes one entry if it is ours (uid) and, for a lock file, not held by
// anyone (flock LOCK_NB taken, then unlinked while held); a segment that is a
// registry or barrier of another shmcoord layout version is never removed, and
// nor is one whose first bytes cannot be read to tell (no fd left). Returns
// why it was kept, or an empty string if it was removed (or already gone).
std::string remove_entry(const OwnedEntry& e);
// A reason remove_entry() gave that means "not ours to remove" (another
// user's, another layout version's): reported as skipped, not kept.
bool not_ours(const std::string& why);

}  // namespace shmcoord
