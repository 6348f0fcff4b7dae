#include "stored.h"

#include <limits>
#include <utility>

#include "files.h"
#include "scenario.h"
#include "stored_json.h"

namespace harness {
namespace {

using stored_json::Json;
using stored_json::describe;
using stored_json::printable;
using Decoder = stored_json::Reader;

template <typename T>
std::optional<T> load(const std::string& path, StoredError* err,
                      std::optional<T> (*parse)(std::string_view, const std::string&,
                                                StoredError*)) {
  auto text = read_stored(path, err);
  return text ? parse(*text, path, err) : std::nullopt;
}

}  // namespace

std::optional<std::string> read_stored(const std::string& path, StoredError* err) {
  std::string why;
  auto text = read_regular_file(path, kMaxUserFileBytes, &why);
  if (!text && err != nullptr) *err = StoredError{path, "", "cannot read: " + why};
  return text;
}

std::string StoredError::to_string() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line);
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

std::optional<StoredSchedule> load_schedule(const std::string& path, StoredError* err) {
  return load<StoredSchedule>(path, err, &parse_schedule);
}
std::optional<StoredVerdict> load_verdict(const std::string& path, StoredError* err) {
  return load<StoredVerdict>(path, err, &parse_verdict);
}
}  // namespace harness
