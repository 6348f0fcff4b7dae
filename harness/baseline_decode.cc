// The baseline decoder (known.h): both formats, as the user or a run wrote
// them, into a Baseline or an error naming file:line. Apart from baseline.cc,
// which wraps it in std::expected, so the clang 14 fuzz build
// (harness/fuzz/stored_fuzz.cc) can compile it: it decodes bytes someone else
// wrote.
#include <cstdint>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "known.h"
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

// A forward iterator over text that counts the lines it has passed, so the
// JSON parser's callback knows where it is.
struct CountingIterator {
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  const char* p = nullptr;
  int* line = nullptr;
  reference operator*() const { return *p; }
  CountingIterator& operator++() {
    if (*p == '\n') ++*line;
    ++p;
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator t = *this;
    ++*this;
    return t;
  }
  bool operator==(const CountingIterator& o) const { return p == o.p; }
};

std::optional<Baseline> baseline_of_summary(std::string_view text, const std::string& file, Day today,
                                            BaselineError* err) {
  int line = 1;
  // Where each element of "buckets" starts, and where its keys are.
  std::vector<int> bucket_line;
  std::vector<std::map<std::string, int>> key_line;
  std::string top_key;
  auto cb = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::key && depth == 1) top_key = parsed.get<std::string>();
    if (top_key == "buckets" && event == E::object_start && depth == 2) {
      bucket_line.push_back(line);
      key_line.emplace_back();
    }
    if (top_key == "buckets" && event == E::key && depth == 3 && !key_line.empty()) {
      key_line.back()[parsed.get<std::string>()] = line;
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(CountingIterator{text.data(), &line},
                              CountingIterator{text.data() + text.size(), &line}, cb);
  } catch (const nlohmann::json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 4, column 1: syntax error ..."
    std::string what = e.what();
    if (auto at = what.find("parse error"); at != std::string::npos) {
      if (auto colon = what.find(": ", at); colon != std::string::npos) what = what.substr(colon + 2);
    }
    return error(err, file, line, "not valid JSON: " + what);
  }
  if (!j.is_object() || !j.contains("buckets") || !j["buckets"].is_array()) {
    return error(err, file, 1,
                 "a JSON baseline must be a run's summary.json (an object with a \"buckets\" "
                 "array); is it from an older shmstress?");
  }
  Baseline b;
  b.file = file;
  std::map<std::string, int> seen;
  // Fields of another type than the run writes (a user may edit the file)
  // read as absent: they only name things in reasons and notes.
  auto field_text = [](const nlohmann::json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string run = j["run_id"].is_string() ? j["run_id"].get<std::string>() : std::string("?");
  b.run_id = run;
  const auto& buckets = j["buckets"];
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const auto& bk = buckets[i];
    const int at = i < bucket_line.size() ? bucket_line[i] : 1;
    auto key_at = [&](const char* key) {
      if (i < key_line.size()) {
        if (auto it = key_line[i].find(key); it != key_line[i].end()) return it->second;
      }
      return at;
    };
    if (!bk.is_object() || !bk.contains("fingerprint") || !bk["fingerprint"].is_string()) {
      return error(err, file, at, "buckets[" + std::to_string(i) + "] has no \"fingerprint\" string");
    }
    KnownFailure k;
    k.line = key_at("fingerprint");
    k.fingerprint = bk["fingerprint"].get<std::string>();
    k.known_in_run = field_text(bk, "status") == "known";
    auto trials = bk.find("trials");
    k.note = field_text(bk, "problem") + "\n" +
             (trials != bk.end() && trials->is_number_integer() ? std::to_string(trials->get<std::int64_t>()) : "?") +
             " trials in run " + run + "; reproduce: " + field_text(bk, "reproduce");
    // A bucket that was known in that run keeps its reason and expiry.
    if (bk.contains("known_reason")) {
      // Blank is refused as the line format refuses it: `shmstress baseline`
      // writes this reason into a line that must have one.
      if (!bk["known_reason"].is_string() || trim(bk["known_reason"].get<std::string>()).empty()) {
        return error(err, file, key_at("known_reason"),
                     "buckets[" + std::to_string(i) + "].known_reason must be a non-blank string");
      }
      k.reason = bk["known_reason"].get<std::string>();
    } else {
      k.reason = "seen in run " + run;
    }
    if (bk.contains("known_expires") && !bk["known_expires"].is_null()) {
      const auto& e = bk["known_expires"];
      k.expires = e.is_string() ? parse_day(e.get<std::string>()) : std::nullopt;
      if (!k.expires) {
        return error(err, file, key_at("known_expires"),
                     "buckets[" + std::to_string(i) +
                         "].known_expires must be a date \"YYYY-MM-DD\" or null");
      }
    }
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
