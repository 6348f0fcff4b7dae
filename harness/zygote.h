// The run's zygote: the native worker exec'd once per run
// (`shmstress-worker zygote`, started by the harness, ZygoteServer), which
// then starts the native workers of every trial by forking itself, instead
// of each trial's supervisor exec'ing one per rank. Most of a no-op
// worker's start-up is the dynamic loader (relocations, and glibc's
// cache-size probe, a cpuid loop this VM traps): a fork pays none of it
// (docs/architecture.md, "What a trial costs").
//
// What a worker started this way promises, as one exec'd by its supervisor
// would: it is in the trial's pid, mount and network namespaces; it is the
// supervisor's own child (re-parented to it, the trial's init: to reap,
// signal and stop) and dies with it; it leads its own process group; its
// signal handling is the default and its mask empty; its environment is the
// request's; fds 0-3, cwd, rlimit and identity are what exec_worker gives
// an exec'd one, and no other fd is open; and shmcoord never ran in it (the
// zygote never calls it, so every lazy initialisation happens in the
// worker, from its own environment). What differs: /proc/<pid>/cmdline says
// `zygote` and /proc/<pid>/environ is the zygote's (both read the process's
// memory as exec left it), the address layout is the zygote's, and the
// trial's zygote is one process more in the trial (so worker pids start
// higher).
//
// A supervisor uses the zygote only when it is init of the trial's pid
// namespace (the re-parenting needs it), for a worker outside containers
// whose loader-time environment (LD_*, GLIBC_TUNABLES, MALLOC_*) is the
// zygote's; it execs every other worker. A zygote that never says hello
// (an older worker binary runs `zygote` as a worker without a trial and
// exits) or cannot start workers is quietly not used; one that fails the
// trial after its hello is a harness error, killed, and what it had not
// answered is exec'd (supervisor_spawn.cc).
#pragma once

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace harness::zygote {

inline constexpr char kArg[] = "zygote";

// How long the harness waits on a zygote: for it to take a message and for
// its answer. Past that it is of no more use, and the workers it did not
// start are exec'd.
inline constexpr int kPatienceMs = 10'000;
// Bounds the harness's sends on `fd` (a registration or a request) by kPatienceMs.
inline void bound_sends(int fd) {
  const struct timeval t { kPatienceMs / 1000, 0 };
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
}

// The registration socket, in the zygote: SOCK_SEQPACKET, the harness's
// end inherited by every supervisor it forks.
inline constexpr int kSockFd = 3;

// A trial registers once: a one-byte message on the registration socket
// whose SCM_RIGHTS carry, in this order, the trial's end of a fresh
// SOCK_SEQPACKET socketpair (its connection, on which it then asks) and its
// supervisor's pid, mount and network namespaces.
inline constexpr int kRegisterFds = 4;

// One request per worker, on the connection: one message holding this
// header and then the environment as NUL-terminated "K=V" strings, with
// kRequestFds fds in its SCM_RIGHTS, in this order: the event log (the
// worker's fd 3), stdout, stderr, the dir it starts in.
struct Request {
  std::int32_t uid = -1, gid = -1;  // >= 0: the identity it drops to
  std::int64_t nofile = -1;         // >= 0: its RLIMIT_NOFILE
};
inline constexpr int kRequestFds = 4;
// A request whose environment does not fit is exec'd instead (well under
// what one SOCK_SEQPACKET message may hold with the default buffers).
inline constexpr std::size_t kMaxRequest = 64 * 1024;

// The first message on a connection is the trial's zygote's hello: its pid
// (in the trial's pid namespace) with error 0, or the errno why it cannot
// start workers (it exits: every worker is exec'd). Then one answer per
// request, in order, once the worker is set up: its pid with error 0; or
// the errno of a clone that failed (pid 0), or of the worker's set-up (with
// its pid: it has exited 127 and the supervisor reaps it, as after a failed
// exec).
struct Reply {
  std::int32_t pid = 0;
  std::int32_t error = 0;
};

// The run's zygote's life: serves registrations on `sock` (each starts a
// trial's zygote, which serves that trial's requests itself) until every
// holder of the registration socket's other end has closed it. Returns its
// exit code (2: `sock` is not a SOCK_SEQPACKET socket).
int serve(int sock);

}  // namespace harness::zygote
