#include "stored.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "files.h"
#include "scenario.h"

namespace harness {
namespace {

using Json = nlohmann::json;

// A value as it may appear in a message: short, printable.
std::string printable(std::string_view s, std::size_t max = 40) {
  std::string out;
  for (char c : s.substr(0, max)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  if (s.size() > max) out += "...";
  return out;
}

std::string describe(const Json& j) {
  switch (j.type()) {
    case Json::value_t::string:
      return "the string \"" + printable(j.get_ref<const std::string&>()) + "\"";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return printable(j.dump());
    case Json::value_t::boolean:
      return j.get<bool>() ? "true" : "false";
    case Json::value_t::null:
      return "null";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "an unusable value";
  }
}

// JSON pointer tokens escape '~' and '/'.
std::string pointer(const std::string& parent, std::string_view key) {
  std::string out = parent + "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// Reads typed fields of one stored document; the first problem is kept.
class Decoder {
 public:
  Decoder(const std::string& file, StoredError* err) : file_(file), err_(err) {}

  bool fail(std::string where, std::string message) {
    if (err_ != nullptr) *err_ = StoredError{file_, std::move(where), std::move(message)};
    return false;
  }

  std::optional<Json> parse(std::string_view text) {
    int line = 0;
    if (json_depth(text, kMaxStoredJsonDepth, &line) > kMaxStoredJsonDepth) {
      fail("line " + std::to_string(line),
           "nested deeper than " + std::to_string(kMaxStoredJsonDepth) + " levels");
      return std::nullopt;
    }
    try {
      Json j = Json::parse(text);
      if (!j.is_object()) {
        fail("", "must be a JSON object, got " + describe(j));
        return std::nullopt;
      }
      return j;
    } catch (const Json::parse_error& e) {
      // "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
      std::string what = e.what();
      if (auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
      fail("", "not valid JSON: " + printable(what, 200));
      return std::nullopt;
    } catch (const std::exception& e) {
      fail("", std::string("cannot be decoded: ") + printable(e.what(), 200));
      return std::nullopt;
    }
  }

  // nullptr if absent (or null, when `null_is_absent`).
  static const Json* field(const Json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  bool missing(const std::string& where) { return fail(where, "is missing"); }

  bool u64(const Json& obj, const char* key, const std::string& at, bool required,
           std::optional<std::uint64_t>* out) {
    const Json* v = field(obj, key);
    const std::string where = pointer(at, key);
    if (v == nullptr) return required ? missing(where) : true;
    if (v->is_number_unsigned()) {
      *out = v->get<std::uint64_t>();
      return true;
    }
    if (v->is_number_integer() && v->get<std::int64_t>() >= 0) {
      *out = static_cast<std::uint64_t>(v->get<std::int64_t>());
      return true;
    }
    return fail(where, "must be an integer in 0..18446744073709551615, got " + describe(*v));
  }

  bool integer(const Json& obj, const char* key, const std::string& at, bool required,
               std::int64_t lo, std::int64_t hi, std::optional<std::int64_t>* out) {
    const Json* v = field(obj, key);
    const std::string where = pointer(at, key);
    if (v == nullptr) return required ? missing(where) : true;
    const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
    if (v->is_number_unsigned() && v->get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
        static_cast<std::int64_t>(v->get<std::uint64_t>()) >= lo) {
      *out = static_cast<std::int64_t>(v->get<std::uint64_t>());
      return true;
    }
    if (v->is_number_integer() && !v->is_number_unsigned() && v->get<std::int64_t>() >= lo &&
        v->get<std::int64_t>() <= hi) {
      *out = v->get<std::int64_t>();
      return true;
    }
    return fail(where, "must be an integer in " + range + ", got " + describe(*v));
  }

  bool number(const Json& obj, const char* key, const std::string& at, double lo,
              std::optional<double>* out) {
    const Json* v = field(obj, key);
    if (v == nullptr) return true;
    const std::string where = pointer(at, key);
    if (v->is_number()) {
      const double d = v->get<double>();
      if (std::isfinite(d) && d >= lo) {
        *out = d;
        return true;
      }
    }
    return fail(where, "must be a number >= " + printable(Json(lo).dump()) + ", got " +
                           describe(*v));
  }

  bool string(const Json& obj, const char* key, const std::string& at, bool required,
              std::optional<std::string>* out) {
    const Json* v = field(obj, key);
    const std::string where = pointer(at, key);
    if (v == nullptr) return required ? missing(where) : true;
    if (!v->is_string()) return fail(where, "must be a string, got " + describe(*v));
    const auto& s = v->get_ref<const std::string&>();
    if (s.find('\0') != std::string::npos) return fail(where, "holds a NUL byte");
    *out = s;
    return true;
  }

  bool verdict(const Json& obj, const char* key, const std::string& at, bool required,
               std::optional<Verdict>* out) {
    std::optional<std::string> name;
    if (!string(obj, key, at, required, &name)) return false;
    if (!name) return true;
    for (Verdict v : {Verdict::kValid, Verdict::kUnknown, Verdict::kInvalid}) {
      if (*name == verdict_name(v)) {
        *out = v;
        return true;
      }
    }
    return fail(pointer(at, key), "must be \"valid\", \"unknown\" or \"invalid\", got the string \"" +
                                      printable(*name) + "\"");
  }

 private:
  const std::string& file_;
  StoredError* err_;
};

template <typename T>
std::optional<T> load(const std::string& path, StoredError* err,
                      std::optional<T> (*parse)(std::string_view, const std::string&,
                                                StoredError*)) {
  std::string why;
  auto text = read_regular_file(path, kMaxUserFileBytes, &why);
  if (!text) {
    if (err != nullptr) *err = StoredError{path, "", "cannot read: " + why};
    return std::nullopt;
  }
  return parse(*text, path, err);
}

}  // namespace

std::string StoredError::to_string() const {
  std::string out = file;
  if (!where.empty()) out += ": " + where;
  return out + ": " + message;
}

int json_depth(std::string_view text, int limit, int* line) {
  int depth = 0, deepest = 0, at_line = 1;
  bool in_string = false, escaped = false;
  *line = 1;
  for (char c : text) {
    if (c == '\n') ++at_line;
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        *line = at_line;
        if (deepest > limit) return deepest;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::optional<StoredSchedule> parse_schedule(std::string_view text, const std::string& file,
                                             StoredError* err) {
  Decoder d(file, err);
  auto j = d.parse(text);
  if (!j) return std::nullopt;
  std::optional<std::int64_t> trial;
  std::optional<std::uint64_t> run_seed, seed;
  StoredSchedule s;
  if (!d.integer(*j, "trial", "", true, 0, std::numeric_limits<int>::max(), &trial) ||
      !d.u64(*j, "run_seed", "", true, &run_seed) || !d.u64(*j, "seed", "", true, &seed) ||
      !d.string(*j, "scenario", "", false, &s.scenario) ||
      !d.string(*j, "scenario_file", "", false, &s.scenario_file) ||
      !d.string(*j, "subject", "", false, &s.subject)) {
    return std::nullopt;
  }
  if (std::string why; s.scenario && !valid_scenario_name(*s.scenario, &why)) {
    d.fail("/scenario", "\"" + printable(*s.scenario) + "\" " + why);
    return std::nullopt;
  }
  if (s.scenario_file && s.scenario_file->empty()) {
    d.fail("/scenario_file", "is empty");
    return std::nullopt;
  }
  s.trial = static_cast<int>(*trial);
  s.run_seed = *run_seed;
  s.seed = *seed;
  return s;
}

std::optional<StoredVerdict> parse_verdict(std::string_view text, const std::string& file,
                                           StoredError* err) {
  Decoder d(file, err);
  auto j = d.parse(text);
  if (!j) return std::nullopt;
  StoredVerdict out;
  std::optional<Verdict> v;
  if (!d.verdict(*j, "verdict", "", false, &v)) return std::nullopt;
  out.verdict = v.value_or(Verdict::kValid);
  const Json* checks = Decoder::field(*j, "checks");
  if (checks == nullptr || checks->is_null()) return out;  // nothing was checked
  if (!checks->is_array()) {
    d.fail("/checks", "must be an array, got " + describe(*checks));
    return std::nullopt;
  }
  for (std::size_t i = 0; i < checks->size(); ++i) {
    const Json& c = (*checks)[i];
    const std::string at = "/checks/" + std::to_string(i);
    if (!c.is_object()) {
      d.fail(at, "must be an object, got " + describe(c));
      return std::nullopt;
    }
    std::optional<std::string> inv;
    std::optional<Verdict> cv;
    std::optional<std::string> excused;
    if (!d.string(c, "invariant", at, true, &inv) || !d.verdict(c, "verdict", at, true, &cv) ||
        !d.string(c, "excused", at, false, &excused)) {
      return std::nullopt;
    }
    if (inv->empty()) {
      d.fail(at + "/invariant", "is empty");
      return std::nullopt;
    }
    std::vector<std::string> problems;
    if (const Json* ps = Decoder::field(c, "problems"); ps != nullptr && !ps->is_null()) {
      if (!ps->is_array()) {
        d.fail(at + "/problems", "must be an array, got " + describe(*ps));
        return std::nullopt;
      }
      for (std::size_t k = 0; k < ps->size(); ++k) {
        if (!(*ps)[k].is_string()) {
          d.fail(at + "/problems/" + std::to_string(k), "must be a string, got " + describe((*ps)[k]));
          return std::nullopt;
        }
        problems.push_back((*ps)[k].get<std::string>());
      }
    }
    out.checks.push_back({*inv, *cv, std::move(excused), std::move(problems)});
  }
  return out;
}

std::optional<StoredSummary> parse_summary(std::string_view text, const std::string& file,
                                           StoredError* err) {
  Decoder d(file, err);
  auto j = d.parse(text);
  if (!j) return std::nullopt;
  StoredSummary s;
  if (!d.string(*j, "run_id", "", false, &s.run_id) ||
      !d.string(*j, "subject", "", false, &s.subject) ||
      !d.number(*j, "elapsed_s", "", 0.0, &s.elapsed_s)) {
    return std::nullopt;
  }
  for (const char* key : {"violations", "unknown"}) {
    const Json* list = Decoder::field(*j, key);
    if (list == nullptr) continue;
    const std::string at = pointer("", key);
    if (!list->is_array()) {
      d.fail(at, "must be an array, got " + describe(*list));
      return std::nullopt;
    }
    auto& out = std::string_view(key) == "violations" ? s.violations : s.unknown;
    for (std::size_t i = 0; i < list->size(); ++i) {
      const Json& v = (*list)[i];
      const std::string vat = at + "/" + std::to_string(i);
      if (!v.is_object()) {
        d.fail(vat, "must be an object, got " + describe(v));
        return std::nullopt;
      }
      std::optional<std::string> dir, reproduce;
      if (!d.string(v, "trial_dir", vat, false, &dir) ||
          !d.string(v, "reproduce", vat, false, &reproduce)) {
        return std::nullopt;
      }
      // Trials past --max-kept have no dir: nothing to look up.
      if (dir && !dir->empty()) out.push_back({*dir, reproduce.value_or("")});
    }
  }
  return s;
}

std::optional<StoredSchedule> load_schedule(const std::string& path, StoredError* err) {
  return load<StoredSchedule>(path, err, &parse_schedule);
}
std::optional<StoredVerdict> load_verdict(const std::string& path, StoredError* err) {
  return load<StoredVerdict>(path, err, &parse_verdict);
}
std::optional<StoredSummary> load_summary(const std::string& path, StoredError* err) {
  return load<StoredSummary>(path, err, &parse_summary);
}

std::optional<Json> load_json_object(const std::string& path, StoredError* err) {
  std::string why;
  auto text = read_regular_file(path, kMaxUserFileBytes, &why);
  if (!text) {
    if (err != nullptr) *err = StoredError{path, "", "cannot read: " + why};
    return std::nullopt;
  }
  return parse_json_object(*text, path, err);
}

std::optional<Json> parse_json_object(std::string_view text, const std::string& file, StoredError* err) {
  return Decoder(file, err).parse(text);
}

}  // namespace harness
