// resource.private: a folder or file a subject creates to share data with its
// own processes is never readable by another user, from the moment it exists —
// including between its creation and the chmod meant to make it private.
//
// Judged from what the creator reported (docs/worker-protocol.md): a `folder`
// or `file` op's value.mode is the mode it was created with (observed before
// anything changed it), a `chmod` op's value.mode the mode it was changed to.
// A folder is readable by another user when its mode lets group or others
// list it (r); a file when its mode lets group or others read it (r) while the
// folder it lies in (if this history created it) lets the same class through
// (x). The mode is certain from the creating op's completion to the next
// chmod's invocation: a readable window there, however short, is a violation.
// Objects reported without a mode are not judged (the native subject and
// Streaming create their segments 0600 and do not report modes).
#include <fmt/format.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "checker.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();

// What an object's mode was, certainly, from `from` to `to`.
struct Span {
  unsigned mode = 0;
  std::int64_t from = 0, to = kForever;
  const Op* ended_by = nullptr;  // the chmod that ended it, if any
};

struct Object {
  std::vector<Span> spans;  // in time order
};

std::string octal(unsigned mode) { return fmt::format("0{:o}", mode); }

// "other users", "its group" or "its group and other users" for read bits 040 / 004.
std::string readers(unsigned read) {
  if ((read & 044) == 044) return "its group and other users";
  return (read & 040) != 0 ? "its group" : "other users";
}

// Its modes over time: as created, then as each of its creator's chmods set it.
Object timeline(const History& h, const Op& made) {
  Object o{{Span{*made.mode, made.complete_t, kForever, nullptr}}};
  for (const Op& c : h.ops) {
    if (c.op != "chmod" || c.pid != made.pid || c.job != made.job || c.rank != made.rank ||
        c.invoke_t < made.complete_t || checks::json_string(c.args, "name") != made.segment->name) {
      continue;
    }
    Span& last = o.spans.back();
    last.to = c.invoke_t;  // certainly the old mode until the chmod began
    last.ended_by = &c;
    if (c.outcome != Outcome::kOk || !c.mode) break;  // what it became is unknown
    o.spans.push_back(Span{*c.mode, c.complete_t, kForever, nullptr});
  }
  return o;
}

// The folder this history created that holds `name` directly, if any.
const Op* folder_of(const History& h, const Op& file) {
  const std::string& name = file.segment->name;
  const auto slash = name.rfind('/');
  if (slash == std::string::npos || slash == 0) return nullptr;
  const std::string dir = name.substr(0, slash);
  const Op* found = nullptr;
  for (const Op& op : h.ops) {
    if (op.op == "folder" && op.outcome == Outcome::kOk && op.segment && op.mode &&
        op.segment->name == dir && op.complete_t <= file.complete_t) {
      found = &op;
    }
  }
  return found;
}

// When its creator began to remove it (a `remove` of it or of its folder), if it did.
std::optional<std::int64_t> removal(const History& h, const Op& made) {
  for (const Op& op : h.ops) {
    if (op.op == "remove" && op.pid == made.pid && op.job == made.job && op.rank == made.rank &&
        op.invoke_t >= made.complete_t && checks::under(made.segment->name, checks::json_string(op.args, "name"))) {
      return op.invoke_t;
    }
  }
  return std::nullopt;
}

std::string until(const History& h, const Op& made, const Span& s, std::int64_t end_of_history) {
  if (s.ended_by != nullptr) {
    return fmt::format("until its chmod to {} began at {} ({} readable)",
                       s.ended_by->mode ? octal(*s.ended_by->mode) : std::string("?"),
                       checks::at(h, s.to), checks::ms(s.to - s.from));
  }
  if (auto gone = removal(h, made)) {
    return fmt::format("and was never made private: so until its removal began at {} ({})", checks::at(h, *gone),
                       checks::ms(*gone - s.from));
  }
  return fmt::format("and was never made private (still so at the end of the history, {})",
                     checks::at(h, end_of_history));
}

CheckResult check_resource_private(const History& h) {
  checks::Report rep("resource.private");
  std::int64_t end = h.end_t;
  for (const Op& op : h.ops) end = std::max(end, op.complete_t);
  for (const Op& made : h.ops) {
    if ((made.op != "folder" && made.op != "file" && made.op != "segment") ||
        made.outcome != Outcome::kOk || !made.segment || !made.mode) {
      continue;
    }
    const Object o = timeline(h, made);
    if (o.spans.size() > 1 || o.spans.front().ended_by != nullptr) rep.reach("resource-chmod-after-create");
    if ((*made.mode & 077) == 0) rep.reach("resource-created-private");
    const std::string what =
        fmt::format("{} {} created by {} at {}", made.op, made.segment->name, checks::who(made),
                    checks::at(h, made.complete_t));
    if (made.op == "folder") {
      for (const Span& s : o.spans) {
        if ((s.mode & 044) == 0) continue;
        rep.reach(s.ended_by != nullptr ? "folder-readable-before-chmod" : "folder-never-private");
        rep.invalid(fmt::format("{} was mode {} ({} may list it) from {} {}", what, octal(s.mode),
                                readers(s.mode & 044), checks::at(h, s.from), until(h, made, s, end)));
        break;
      }
      continue;
    }
    // A file: readable by a class (group, others) while its folder lets that class through.
    const Op* dir = folder_of(h, made);
    const Object folder = dir != nullptr ? timeline(h, *dir) : Object{};
    for (const Span& s : o.spans) {
      // The classes (group, others) that may read it and get to it, and since when.
      unsigned who = 0;
      std::int64_t since = s.to;
      for (unsigned read : {040u, 004u}) {
        if ((s.mode & read) == 0) continue;
        const unsigned pass = read >> 2;  // the same class's x bit
        if (dir == nullptr) {  // a folder it did not create: assume others get through
          who |= read;
          since = std::min(since, s.from);
          continue;
        }
        for (const Span& d : folder.spans) {
          if ((d.mode & pass) == 0) continue;
          const std::int64_t a = std::max(s.from, d.from), b = std::min(s.to, d.to);
          if (a <= b) {
            who |= read;
            since = std::min(since, a);
            break;
          }
        }
      }
      if (who == 0) continue;
      rep.reach("file-readable-before-chmod");
      rep.invalid(fmt::format(
          "{} was mode {} ({} may read it){} from {} (written from {}) {}", what, octal(s.mode), readers(who),
          dir == nullptr ? "" : fmt::format(" in folder {} that lets them through", dir->segment->name),
          checks::at(h, since), checks::at(h, made.invoke_t), until(h, made, s, end)));
      break;
    }
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "resource.private",
    "a folder or file a subject creates for its own processes is never readable by another user, even before its chmod",
    harness::check_resource_private,
    {"resource-created-private", "resource-chmod-after-create", "folder-readable-before-chmod",
     "folder-never-private", "file-readable-before-chmod"});
