// A process that holds a lock file with flock, for the faults that need a
// live holder (a stopped process, or a forgotten child that inherited the fd
// of a rank that died).
#pragma once

#include <sys/types.h>

#include <string>

namespace harness::supervision {

// Starts the holder and returns its pid once it holds `path` (LOCK_EX), or -1
// when it cannot (the lock is held already, or the file cannot be opened).
// Never waits for a lock someone else holds.
//
// inherited = false: a child of the caller, stopped, dying with the caller.
// inherited = true: the grandchild of the caller, holding the lock through
// an fd its parent opened; the parent has exited. On return the holder has
// already been re-parented to the caller (which must be a subreaper, or init
// of its pid namespace) and dies with it: a holder that would outlive the
// caller, or be re-parented elsewhere, exits instead and -1 is returned.
// Until that handshake, the holder's own parent may be alive: returning
// earlier would leave a window where the holder decides to quit after the
// caller has announced the lock as held.
pid_t hold_lock(const std::string& path, bool inherited);

}  // namespace harness::supervision
