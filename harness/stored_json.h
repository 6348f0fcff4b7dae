// How the stored files (stored.h, summary.h) are read: one reader of typed
// JSON fields, so every decoder of a file someone else may have edited refuses
// the same way. A value that does not fit is a StoredError naming the file, the
// JSON pointer of the value (its keys made printable) and what was wanted,
// with the value quoted short and printable; never an exception.
//
// Internal to the stored-file decoders; no <expected>, so the clang 14 fuzz
// build (harness/fuzz/) compiles it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker.h"
#include "known.h"
#include "stored.h"

namespace harness::stored_json {

using Json = nlohmann::json;

// A value as it may appear in a message: at most `max` bytes, control
// characters (C0, DEL, C1) as '?'.
std::string printable(std::string_view s, std::size_t max = 40);
// "the string \"abc\"", "7", "an array", ...
std::string describe(const Json& j);
// parent + "/" + key, the key escaped as RFC 6901 says and made printable.
std::string pointer(const std::string& parent, std::string_view key);
std::string pointer(const std::string& parent, std::size_t index);

// Sees every parse event with the line it was on (1-based), for decoders
// that name lines.
using ParseObserver =
    std::function<void(int depth, Json::parse_event_t event, const Json& parsed, int line)>;

// Reads typed fields of one stored document; the first problem is kept in
// *err (err may be null). Every reader returns false once it failed; `at` is
// the JSON pointer of `obj`. A field that is absent is left as it is unless
// `required` (then "is missing"); a field that is present must have its type
// and range, null included.
class Reader {
 public:
  Reader(const std::string& file, StoredError* err) : file_(file), err_(err) {}

  bool fail(std::string where, std::string message);

  // The document: a JSON object nested at most kMaxStoredJsonDepth deep.
  std::optional<Json> parse(std::string_view text, const ParseObserver* observe = nullptr);

  static const Json* field(const Json& obj, const char* key);

  bool u64(const Json& obj, const char* key, const std::string& at, bool required,
           std::optional<std::uint64_t>* out);
  bool integer(const Json& obj, const char* key, const std::string& at, bool required,
               std::int64_t lo, std::int64_t hi, std::optional<std::int64_t>* out);
  // An int in lo..INT_MAX.
  bool int32(const Json& obj, const char* key, const std::string& at, bool required, int lo,
             std::optional<int>* out);
  // A count a run reaches: 0..kMaxStoredCount. Past it the message says so.
  bool count(const Json& obj, const char* key, const std::string& at, bool required,
             std::optional<std::uint64_t>* out);
  bool count_value(const Json& v, const std::string& where, std::uint64_t* out);
  // A finite number >= lo (any finite number when lo is -infinity).
  bool number(const Json& obj, const char* key, const std::string& at, bool required, double lo,
              std::optional<double>* out);
  bool number_value(const Json& v, const std::string& where, double lo, double* out);
  bool boolean(const Json& obj, const char* key, const std::string& at, bool required,
               std::optional<bool>* out);
  // A string without a NUL byte.
  bool string(const Json& obj, const char* key, const std::string& at, bool required,
              std::optional<std::string>* out);
  bool string_value(const Json& v, const std::string& where, std::string* out);
  bool strings_value(const Json& v, const std::string& where, std::vector<std::string>* out);
  bool strings(const Json& obj, const char* key, const std::string& at, bool required,
               std::optional<std::vector<std::string>>* out);
  bool verdict(const Json& obj, const char* key, const std::string& at, bool required,
               std::optional<Verdict>* out);
  // "YYYY-MM-DD", or null (none).
  bool day(const Json& obj, const char* key, const std::string& at, std::optional<Day>* out);
  // The array or object at obj[key]: nullptr if absent (and not `required`)
  // or on failure (then *ok is false).
  const Json* array(const Json& obj, const char* key, const std::string& at, bool required,
                    bool* ok);
  const Json* object(const Json& obj, const char* key, const std::string& at, bool required,
                     bool* ok);
  bool is_object(const Json& v, const std::string& where);

 private:
  const std::string& file_;
  StoredError* err_;
};

}  // namespace harness::stored_json
