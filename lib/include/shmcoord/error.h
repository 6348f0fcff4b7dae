// shmcoord errors: every fallible call returns Result<T>. errno is mapped to a
// Code once, at the syscall, together with the syscall and the object it touched,
// so a caller can branch on `code` and a human can read `message`.
// Exceptions never cross this API.
#pragma once

#include <expected>
#include <string>
#include <string_view>

namespace shmcoord {

enum class Code {
  kOk = 0,
  kInvalidArgument,  // caller passed something that can never work
  kPermission,       // EACCES / EPERM, or an entry owned by another user
  kNotFound,         // the named object does not exist
  kExists,           // exclusive create found the name taken
  kInUse,            // a live job holds what we asked for (e.g. a local dir)
  kMismatch,         // participants disagree (world size, dirs, process count)
  kTimeout,          // a deadline passed
  kBroken,           // a barrier was broken by a dead, departed or late participant
  kCorrupt,          // a shared record failed validation
  kExhausted,        // EMFILE, ENFILE, ENOSPC, ENOMEM, no free slot
  kIo,               // any other syscall failure
};

std::string_view code_name(Code c);

struct Error {
  Code code = Code::kIo;
  int sys_errno = 0;     // the errno behind it, 0 if none
  std::string message;   // "shm_open(/shmc.registry): Permission denied"

  std::string to_string() const;
};

template <typename T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

Code code_from_errno(int e);
Error make_error(Code code, std::string message, int sys_errno = 0);
// Builds "what(object): strerror(e)" with the code mapped from e.
Error sys_error(std::string_view what, std::string_view object, int e);

inline std::unexpected<Error> fail(Code code, std::string message, int sys_errno = 0) {
  return std::unexpected(make_error(code, std::move(message), sys_errno));
}

}  // namespace shmcoord
