#include "shmcoord/error.h"

#include <cerrno>
#include <cstring>

namespace shmcoord {

std::string_view code_name(Code c) {
  switch (c) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid-argument";
    case Code::kPermission: return "permission";
    case Code::kNotFound: return "not-found";
    case Code::kExists: return "exists";
    case Code::kInUse: return "in-use";
    case Code::kMismatch: return "mismatch";
    case Code::kTimeout: return "timeout";
    case Code::kBroken: return "broken";
    case Code::kCorrupt: return "corrupt";
    case Code::kExhausted: return "exhausted";
    case Code::kIo: return "io";
  }
  return "unknown";
}

std::string Error::to_string() const {
  return std::string(code_name(code)) + ": " + message;
}

Code code_from_errno(int e) {
  switch (e) {
    case EACCES:
    case EPERM: return Code::kPermission;
    case ENOENT: return Code::kNotFound;
    case EEXIST: return Code::kExists;
    case EMFILE:
    case ENFILE:
    case ENOSPC:
    case ENOMEM: return Code::kExhausted;
    case ETIMEDOUT: return Code::kTimeout;
    case EINVAL: return Code::kInvalidArgument;
    default: return Code::kIo;
  }
}

Error make_error(Code code, std::string message, int sys_errno) {
  return Error{code, sys_errno, std::move(message)};
}

Error sys_error(std::string_view what, std::string_view object, int e) {
  std::string msg(what);
  msg += "(";
  msg += object;
  msg += "): ";
  msg += std::strerror(e);
  return Error{code_from_errno(e), e, std::move(msg)};
}

}  // namespace shmcoord
