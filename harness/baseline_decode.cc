// The baseline decoder (known.h): both formats, as the user or a run wrote
// them, into a Baseline or an error naming file:line; a summary.json through
// its one decoder (summary.h). Apart from baseline.cc, which wraps it in
// std::expected, so the clang 14 fuzz build (harness/fuzz/baseline_fuzz.cc)
// can compile it: it decodes bytes someone else wrote.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "known.h"
#include "summary.h"
#include "triage.h"

namespace harness {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The next whitespace-separated field of `s`, consumed.
std::string_view field(std::string_view& s) {
  s = trim(s);
  std::size_t n = 0;
  while (n < s.size() && s[n] != ' ' && s[n] != '\t') ++n;
  std::string_view f = s.substr(0, n);
  s.remove_prefix(n);
  return f;
}

std::nullopt_t error(BaselineError* err, const std::string& file, int line, std::string message) {
  *err = BaselineError{file, line, std::move(message)};
  return std::nullopt;
}

// Checks and files one entry (either format).
std::optional<BaselineError> add(Baseline& b, KnownFailure k, Day today,
                                 std::map<std::string, int>& seen) {
  if (!parse_fingerprint(k.fingerprint)) {
    return BaselineError{b.file, k.line,
                         "'" + k.fingerprint +
                             "' is not a fingerprint (expected INVARIANT/SCENARIO/HASH, HASH 12 "
                             "hex digits, as `shmstress baseline` writes it)"};
  }
  if (auto it = seen.find(k.fingerprint); it != seen.end()) {
    return BaselineError{b.file, k.line,
                         k.fingerprint + " is listed twice (first on line " +
                             std::to_string(it->second) + ")"};
  }
  seen[k.fingerprint] = k.line;
  if (k.expires && *k.expires < today) {
    b.expired.push_back(std::move(k));
  } else {
    std::string fp = k.fingerprint;
    b.known.emplace(std::move(fp), std::move(k));
  }
  return std::nullopt;
}

std::optional<Baseline> parse_lines(std::string_view text, const std::string& file, Day today,
                                    BaselineError* err) {
  Baseline b;
  b.file = file;
  std::map<std::string, int> seen;
  int line = 0;
  for (std::size_t pos = 0; pos <= text.size();) {
    ++line;
    const std::size_t nl = text.find('\n', pos);
    std::string_view rest = trim(text.substr(pos, nl == std::string_view::npos ? nl : nl - pos));
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    if (rest.empty() || rest.front() == '#') continue;
    KnownFailure k;
    k.line = line;
    k.fingerprint = std::string(field(rest));
    const std::string_view exp = field(rest);
    if (exp.empty()) {
      return error(err, file, line,
                   "expected FINGERPRINT EXPIRES REASON, got only a fingerprint (EXPIRES is "
                   "YYYY-MM-DD or never)");
    }
    if (exp != "never") {
      k.expires = parse_day(exp);
      if (!k.expires) {
        return error(err, file, line,
                     "expiry '" + std::string(exp) + "' is not a date (YYYY-MM-DD) or never");
      }
    }
    k.reason = std::string(trim(rest));
    if (k.reason.empty()) {
      return error(err, file, line, "no reason for " + k.fingerprint + ": say why it is known");
    }
    if (auto e = add(b, std::move(k), today, seen)) {
      *err = *e;
      return std::nullopt;
    }
  }
  return b;
}

// A run's summary.json (summary.h decodes it): its buckets, each with the
// reason and expiry it was known by in that run, or "seen in run <id>".
std::optional<Baseline> baseline_of_summary(std::string_view text, const std::string& file, Day today,
                                            BaselineError* err) {
  StoredError e;
  const std::optional<StoredSummary> s = parse_summary(text, file, &e);
  if (!s) {
    return error(err, file, e.line, e.where.empty() ? e.message : e.where + ": " + e.message);
  }
  if (!s->buckets) {
    return error(err, file, 1,
                 "a JSON baseline must be a run's summary.json (an object with a \"buckets\" "
                 "array); is it from an older shmstress?");
  }
  Baseline b;
  b.file = file;
  const std::string run = s->run_id.value_or("?");
  b.run_id = run;
  std::map<std::string, int> seen;
  for (const StoredBucket& bk : *s->buckets) {
    KnownFailure k;
    k.line = bk.line;
    k.fingerprint = bk.fingerprint;
    k.known_in_run = bk.known.value_or(false);
    k.note = bk.problem.value_or("") + "\n" + (bk.trials ? std::to_string(*bk.trials) : "?") +
             " trials in run " + run + "; reproduce: " + bk.reproduce.value_or("");
    // A bucket that was known in that run keeps its reason and expiry.
    k.reason = bk.known_reason.value_or("seen in run " + run);
    k.expires = bk.known_expires;
    if (auto e = add(b, std::move(k), today, seen)) {
      *err = *e;
      return std::nullopt;
    }
  }
  return b;
}

}  // namespace

std::string BaselineError::to_string() const {
  return line > 0 ? file + ":" + std::to_string(line) + ": " + message : file + ": " + message;
}

std::optional<Baseline> decode_baseline(std::string_view text, const std::string& file, Day today,
                                        BaselineError* err) {
  std::string_view t = trim(text);
  while (!t.empty() && (t.front() == '\n' || t.front() == ' ')) t = trim(t.substr(1));
  if (!t.empty() && t.front() == '{') return baseline_of_summary(text, file, today, err);
  return parse_lines(text, file, today, err);
}

}  // namespace harness
