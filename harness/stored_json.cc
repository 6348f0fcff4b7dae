#include "stored_json.h"

#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

namespace harness::stored_json {
namespace {

// A forward iterator over text that counts the lines it has passed, so a
// parse observer knows where it is.
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

}  // namespace

std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  const std::string_view head = s.substr(0, max);
  for (std::size_t i = 0; i < head.size(); ++i) {
    const auto u = static_cast<unsigned char>(head[i]);
    // C1 controls (U+0080..U+009F, e.g. a terminal's 8-bit CSI) are 0xC2 0x80..0x9F in UTF-8.
    if (u == 0xc2 && i + 1 < head.size() && static_cast<unsigned char>(head[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(head[i + 1]) <= 0x9f) {
      out += '?';
      ++i;
      continue;
    }
    out += (u < 0x20 || u == 0x7f) ? '?' : head[i];
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

std::string pointer(const std::string& parent, std::string_view key) {
  std::string out = parent + "/";
  for (char c : printable(key)) {
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

std::string pointer(const std::string& parent, std::size_t index) {
  return parent + "/" + std::to_string(index);
}

bool Reader::fail(std::string where, std::string message) {
  if (err_ != nullptr) *err_ = StoredError{file_, std::move(where), std::move(message)};
  return false;
}

std::optional<Json> Reader::parse(std::string_view text, const ParseObserver* observe) {
  int line = 0;
  if (json_depth(text, kMaxStoredJsonDepth, &line) > kMaxStoredJsonDepth) {
    fail("line " + std::to_string(line),
         "nested deeper than " + std::to_string(kMaxStoredJsonDepth) + " levels");
    return std::nullopt;
  }
  try {
    Json j;
    if (observe != nullptr) {
      int at = 1;
      auto cb = [&](int depth, Json::parse_event_t event, Json& parsed) {
        (*observe)(depth, event, parsed, at);
        return true;
      };
      j = Json::parse(CountingIterator{text.data(), &at},
                      CountingIterator{text.data() + text.size(), &at}, cb);
    } else {
      j = Json::parse(text);
    }
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

const Json* Reader::field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

bool Reader::u64(const Json& obj, const char* key, const std::string& at, bool required,
                 std::optional<std::uint64_t>* out) {
  const Json* v = field(obj, key);
  const std::string where = pointer(at, key);
  if (v == nullptr) return required ? fail(where, "is missing") : true;
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

bool Reader::integer(const Json& obj, const char* key, const std::string& at, bool required,
                     std::int64_t lo, std::int64_t hi, std::optional<std::int64_t>* out) {
  const Json* v = field(obj, key);
  const std::string where = pointer(at, key);
  if (v == nullptr) return required ? fail(where, "is missing") : true;
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

bool Reader::int32(const Json& obj, const char* key, const std::string& at, bool required, int lo,
                   std::optional<int>* out) {
  std::optional<std::int64_t> v;
  if (!integer(obj, key, at, required, lo, std::numeric_limits<int>::max(), &v)) return false;
  if (v) *out = static_cast<int>(*v);
  return true;
}

bool Reader::count_value(const Json& v, const std::string& where, std::uint64_t* out) {
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
    const std::uint64_t n = v.get<std::uint64_t>();
    if (n > kMaxStoredCount) {
      return fail(where, std::to_string(n) + " is past any run's count (at most 2^40)");
    }
    *out = n;
    return true;
  }
  return fail(where, "must be a count (an integer in 0..2^40), got " + describe(v));
}

bool Reader::count(const Json& obj, const char* key, const std::string& at, bool required,
                   std::optional<std::uint64_t>* out) {
  const Json* v = field(obj, key);
  const std::string where = pointer(at, key);
  if (v == nullptr) return required ? fail(where, "is missing") : true;
  std::uint64_t n = 0;
  if (!count_value(*v, where, &n)) return false;
  *out = n;
  return true;
}

bool Reader::number_value(const Json& v, const std::string& where, double lo, double* out) {
  if (v.is_number()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d >= lo) {
      *out = d;
      return true;
    }
  }
  if (!std::isfinite(lo)) return fail(where, "must be a finite number, got " + describe(v));
  return fail(where, "must be a number >= " + printable(Json(lo).dump()) + ", got " + describe(v));
}

bool Reader::number(const Json& obj, const char* key, const std::string& at, bool required,
                    double lo, std::optional<double>* out) {
  const Json* v = field(obj, key);
  const std::string where = pointer(at, key);
  if (v == nullptr) return required ? fail(where, "is missing") : true;
  double d = 0;
  if (!number_value(*v, where, lo, &d)) return false;
  *out = d;
  return true;
}

bool Reader::boolean(const Json& obj, const char* key, const std::string& at, bool required,
                     std::optional<bool>* out) {
  const Json* v = field(obj, key);
  const std::string where = pointer(at, key);
  if (v == nullptr) return required ? fail(where, "is missing") : true;
  if (!v->is_boolean()) return fail(where, "must be true or false, got " + describe(*v));
  *out = v->get<bool>();
  return true;
}

bool Reader::string_value(const Json& v, const std::string& where, std::string* out) {
  if (!v.is_string()) return fail(where, "must be a string, got " + describe(v));
  const auto& s = v.get_ref<const std::string&>();
  if (s.find('\0') != std::string::npos) return fail(where, "holds a NUL byte");
  *out = s;
  return true;
}

bool Reader::string(const Json& obj, const char* key, const std::string& at, bool required,
                    std::optional<std::string>* out) {
  const Json* v = field(obj, key);
  const std::string where = pointer(at, key);
  if (v == nullptr) return required ? fail(where, "is missing") : true;
  std::string s;
  if (!string_value(*v, where, &s)) return false;
  *out = std::move(s);
  return true;
}

bool Reader::strings_value(const Json& v, const std::string& where, std::vector<std::string>* out) {
  if (!v.is_array()) return fail(where, "must be an array, got " + describe(v));
  out->clear();
  out->reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::string s;
    if (!string_value(v[i], pointer(where, i), &s)) return false;
    out->push_back(std::move(s));
  }
  return true;
}

bool Reader::strings(const Json& obj, const char* key, const std::string& at, bool required,
                     std::optional<std::vector<std::string>>* out) {
  const Json* v = field(obj, key);
  const std::string where = pointer(at, key);
  if (v == nullptr) return required ? fail(where, "is missing") : true;
  std::vector<std::string> list;
  if (!strings_value(*v, where, &list)) return false;
  *out = std::move(list);
  return true;
}

bool Reader::verdict(const Json& obj, const char* key, const std::string& at, bool required,
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

bool Reader::day(const Json& obj, const char* key, const std::string& at, std::optional<Day>* out) {
  const Json* v = field(obj, key);
  if (v == nullptr || v->is_null()) return true;
  if (v->is_string()) {
    if (auto d = parse_day(v->get_ref<const std::string&>())) {
      *out = d;
      return true;
    }
  }
  return fail(pointer(at, key), "must be a date \"YYYY-MM-DD\" or null, got " + describe(*v));
}

const Json* Reader::array(const Json& obj, const char* key, const std::string& at, bool required,
                          bool* ok) {
  const Json* v = field(obj, key);
  if (v == nullptr) {
    if (required) *ok = fail(pointer(at, key), "is missing");
    return nullptr;
  }
  if (!v->is_array()) {
    *ok = fail(pointer(at, key), "must be an array, got " + describe(*v));
    return nullptr;
  }
  return v;
}

const Json* Reader::object(const Json& obj, const char* key, const std::string& at, bool required,
                           bool* ok) {
  const Json* v = field(obj, key);
  if (v == nullptr) {
    if (required) *ok = fail(pointer(at, key), "is missing");
    return nullptr;
  }
  if (!v->is_object()) {
    *ok = fail(pointer(at, key), "must be an object, got " + describe(*v));
    return nullptr;
  }
  return v;
}

bool Reader::is_object(const Json& v, const std::string& where) {
  return v.is_object() || fail(where, "must be an object, got " + describe(v));
}

}  // namespace harness::stored_json
