// Scenario parsing: TOML (toml++) → harness::Scenario.
//
// Promises (see docs/scenarios.md for the format):
// - Every problem is reported as one ScenarioError naming the file and the line
//   of the offending key or value, so `shmstress run` can exit 2 with a message
//   a user can act on. When several things are wrong, the first one found
//   walking each table's keys in file order is reported (toml++ tables
//   iterate in key order, so keys are sorted by position first).
// - Unknown keys are errors, never ignored: a misspelled `clean_befor` must not
//   silently run a different experiment than the one the author meant.
// - No exception leaves parse_scenario / load_scenario: toml++'s parse_error
//   and anything else thrown inside are caught and turned into a ScenarioError.
#include "scenario.h"

#include "checker.h"
#include "files.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

namespace harness {
namespace {

// Limits. They bound what one node can run in a trial, and catch typos such as
// ranks = 800 or timeout = "20m" (meant "20s") before they cost a CI hour.
constexpr int kMaxJobs = 64;         // after expanding `count`
constexpr int kMaxTotalRanks = 256;  // over all jobs
constexpr int kMaxCount = 64;
constexpr int kMaxRanks = 64;
constexpr int kMaxDirs = 16;
constexpr int kMaxRounds = 10000;
constexpr int kMaxDatasets = 8;
constexpr int kMaxTrials = 100000;
constexpr int kMaxLwsWrong = 4096;
constexpr Ms kMaxJitter = std::chrono::minutes(10);  // any range (jitter, hold)
constexpr Ms kMinTimeout{100};
constexpr Ms kMaxTimeout = std::chrono::minutes(10);
constexpr Ms kMinDeadline{10};
constexpr Ms kMaxDeadline = std::chrono::minutes(5);

const std::vector<std::string_view> kTopKeys = {
    "name",   "description", "excuse",        "expect_reached", "expect_violation",
    "expect_evidence", "trials", "timeout", "final_cleanup",  "deadlines", "every",
    "job",    "fault",       "subject",       "sometimes"};
const std::vector<std::string_view> kDeadlineKeys = {"acquire", "barrier", "liveness", "release",
                                                     "start",   "cleanup", "spin"};
const std::vector<std::string_view> kJobKeys = {
    "count", "ranks", "dirs", "remote", "start_jitter", "local_world_size", "workload", "loader", "launcher",
    "root_suffix"};
const std::vector<std::string_view> kWorkloadKeys = {
    "acquire",      "rounds",      "round_jitter", "hold",    "release",         "segments",
    "clean_before", "clean_after", "clean_between", "datasets", "barrier_liveness", "retries",
    "repeat_for"};
const std::vector<std::string_view> kLoaderKeys = {"workers", "start", "barrier", "work"};
const std::vector<std::string_view> kLauncherKeys = {"kind", "max_restarts", "run_id", "teardown"};
constexpr int kMaxLoaderWorkers = 8;
constexpr int kMaxRetries = 10;

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

std::string join(const std::vector<std::string_view>& v) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

// "1500ms", "1.5s" ... for messages.
std::string fmt_ms(Ms ms) {
  const auto v = ms.count();
  if (v >= 60000 && v % 60000 == 0) return std::to_string(v / 60000) + "m";
  if (v >= 1000 && v % 1000 == 0) return std::to_string(v / 1000) + "s";
  return std::to_string(v) + "ms";
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One duration: digits [ "." digits ] [ unit ], unit ∈ {ms, s, m}. The value
// must be a whole number of milliseconds (the harness's resolution). `unit` is
// left empty when absent so a range's left side can borrow the right's unit.
// Returns false with *why set on malformed input.
bool parse_duration_token(std::string_view s, std::int64_t* ms, std::string_view* unit,
                          std::string* why) {
  std::size_t i = 0;
  std::int64_t whole = 0;
  std::size_t whole_digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (++whole_digits > 9) {
      *why = "number too large";
      return false;
    }
    whole = whole * 10 + (s[i] - '0');
    ++i;
  }
  std::int64_t frac = 0, frac_scale = 1;
  if (i < s.size() && s[i] == '.') {
    ++i;
    std::size_t frac_digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (++frac_digits > 6) {
        *why = "too many decimals";
        return false;
      }
      frac = frac * 10 + (s[i] - '0');
      frac_scale *= 10;
      ++i;
    }
    if (frac_digits == 0) {
      *why = "no digits after '.'";
      return false;
    }
  }
  if (whole_digits == 0) {
    *why = "expected a number";
    return false;
  }
  *unit = s.substr(i);
  std::int64_t factor = 1;
  if (unit->empty() || *unit == "ms") {
    factor = 1;
  } else if (*unit == "s") {
    factor = 1000;
  } else if (*unit == "m") {
    factor = 60000;
  } else {
    *why = "unknown unit '" + std::string(*unit) + "' (use ms, s or m)";
    return false;
  }
  if ((frac * factor) % frac_scale != 0) {
    *why = "not a whole number of milliseconds";
    return false;
  }
  *ms = whole * factor + frac * factor / frac_scale;
  return true;
}

// Applies a unit given by the other side of a range to a bare number.
bool apply_unit(std::string_view token, std::string_view unit, std::int64_t* ms, std::string* why) {
  std::string with_unit(token);
  with_unit += unit;
  std::string_view ignored;
  return parse_duration_token(with_unit, ms, &ignored, why);
}

}  // namespace

bool parse_range_text(std::string_view text, MsRange* out, std::string* why) {
  const std::size_t dash = text.find('-');
  std::int64_t lo = 0, hi = 0;
  if (dash == std::string_view::npos) {
    std::string_view unit;
    if (!parse_duration_token(trim(text), &lo, &unit, why)) return false;
    if (unit.empty()) {
      *why = "missing unit";
      return false;
    }
    hi = lo;
  } else {
    const std::string_view left = trim(text.substr(0, dash));
    const std::string_view right = trim(text.substr(dash + 1));
    std::string_view lunit, runit;
    if (right.find('-') != std::string_view::npos) {
      *why = "more than one '-'";
      return false;
    }
    if (!parse_duration_token(left, &lo, &lunit, why)) return false;
    if (!parse_duration_token(right, &hi, &runit, why)) return false;
    if (runit.empty()) {
      *why = "missing unit";
      return false;
    }
    if (lunit.empty() && !apply_unit(left, runit, &lo, why)) return false;
    if (lo > hi) {
      *why = "the range is reversed (min > max)";
      return false;
    }
  }
  out->min = Ms(lo);
  out->max = Ms(hi);
  return true;
}

namespace {

// Parses a scenario into *out, stopping at the first error (kept in err_).
class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  const ScenarioError& error() const { return err_; }

  bool parse(const toml::table& root, Scenario* out) {
    for (const auto& [key, node] : sorted(root)) {
      const std::string_view k = key->str();
      bool ok = true;
      if (k == "name") {
        ok = get_name(*node, &out->name);
      } else if (k == "description") {
        ok = get_string(*node, "description", &out->description, /*allow_empty=*/true);
      } else if (k == "invariants") {
        // Deprecated: it used to restrict checking (now every invariant is
        // always checked). Old known-bad scenarios listed what they expected
        // to break, so it is read as expect_violation, with a warning.
        deprecated_invariants = node;
        ok = get_invariant_list(*node, "invariants", &out->expect_violation);
        if (ok) {
          out->warnings.push_back(
              file_ + ":" + std::to_string(key_line(*key, *node)) +
              ": 'invariants' is deprecated and read as 'expect_violation': every invariant is "
              "checked on every trial; name what a known-bad subject should break with "
              "expect_violation, and excuse an invariant only with [excuse] \"id\" = \"why\"");
        }
      } else if (k == "expect_violation") {
        expect_violation = node;
        ok = get_invariant_list(*node, "expect_violation", &out->expect_violation);
      } else if (k == "expect_reached") {
        ok = get_state_list(*node, "expect_reached", &out->expect_reached, /*alternatives=*/true);
      } else if (k == "expect_evidence") {
        ok = get_state_list(*node, "expect_evidence", &out->expect_evidence, /*alternatives=*/true);
      } else if (k == "excuse") {
        ok = parse_excuses(*node, out);
      } else if (k == "trials") {
        ok = get_int(*node, "trials", 1, kMaxTrials, &out->default_trials);
      } else if (k == "every") {
        ok = get_int(*node, "every", 1, 1000, &out->every);
      } else if (k == "timeout") {
        ok = get_duration(*node, "timeout", kMinTimeout, kMaxTimeout, &out->trial_timeout);
      } else if (k == "final_cleanup") {
        ok = get_bool(*node, "final_cleanup", &out->final_cleanup);
      } else if (k == "sometimes") {
        ok = get_bool(*node, "sometimes", &out->sometimes);
      } else if (k == "subject") {
        ok = get_string(*node, "subject", &out->subject, /*allow_empty=*/false);
        out->subject_line = key_line(*key, *node);
      } else if (k == "deadlines") {
        ok = parse_deadlines(*node, out);
      } else if (k == "job") {
        ok = parse_jobs(*node, out);
      } else if (k == "fault") {
        ok = parse_faults(*node, out);
      } else {
        ok = unknown(*key, *node, kTopKeys, "at top level");
      }
      if (!ok) return false;
    }
    if (out->jobs.empty()) return fail(0, "no [[job]]: a scenario needs at least one job");
    for (const JobSpec& j : out->jobs) {
      // The subject notices a death only when its interval ends: a bound
      // shorter than that would fail a correct subject.
      if (j.workload.barrier_liveness > out->liveness) {
        return fail(j.line, "'barrier_liveness' = " + fmt_ms(j.workload.barrier_liveness) +
                                " exceeds deadlines.liveness = " + fmt_ms(out->liveness) +
                                ": a death is noticed only once the subject's interval ends; raise "
                                "deadlines.liveness to at least the interval");
      }
      // Each pass must be a whole job on its own: a second rank, a barrier
      // round or a loader would meet the previous pass's leftovers under the
      // same job key and leave the history ambiguous.
      if (j.workload.repeat_for.count() > 0) {
        std::string why;
        if (j.ranks != 1) {
          why = "ranks = " + std::to_string(j.ranks);
        } else if (j.workload.rounds != 0) {
          why = "rounds = " + std::to_string(j.workload.rounds);
        } else if (j.loader.workers != 0) {
          why = "a loader";
        } else if (j.workload.datasets != 1) {
          why = "datasets = " + std::to_string(j.workload.datasets);
        } else if (j.launcher.present()) {
          why = "a launcher";
        }
        if (!why.empty()) {
          return fail(j.line, "'repeat_for' needs a job of one rank with no rounds, loader, launcher or "
                              "second dataset (each pass is a job of its own); this job has " + why);
        }
        if (j.workload.repeat_for >= out->trial_timeout) {
          return fail(j.line, "'repeat_for' = " + fmt_ms(j.workload.repeat_for) +
                                  " is not shorter than the trial's timeout (" + fmt_ms(out->trial_timeout) + ")");
        }
      }
    }
    if (deprecated_invariants != nullptr && expect_violation != nullptr) {
      return fail(*deprecated_invariants,
                  "'invariants' and 'expect_violation' both given: 'invariants' is the deprecated "
                  "name of 'expect_violation'; keep only expect_violation");
    }
    if (!out->expect_evidence.empty() && out->expect_violation.empty()) {
      return fail(0, "'expect_evidence' needs 'expect_violation': the evidence is what makes a "
                     "violation of it count as the expected one");
    }
    for (const auto& inv : out->expect_violation) {
      if (out->excuses.contains(inv)) {
        return fail(0, "\"" + inv + "\" is both excused and expected to be violated");
      }
    }
    return true;
  }

 private:
  using Entry = std::pair<const toml::key*, const toml::node*>;

  const toml::node* deprecated_invariants = nullptr;
  const toml::node* expect_violation = nullptr;

  bool fail(int line, std::string message) {
    err_.file = file_;
    err_.line = line;
    err_.message = std::move(message);
    return false;
  }
  bool fail(const toml::node& n, std::string message) {
    return fail(line_of(n), std::move(message));
  }

  // A table's entries in file order, so the first error reported is the
  // topmost one.
  static std::vector<Entry> sorted(const toml::table& t) {
    std::vector<Entry> v;
    for (const auto& [k, n] : t) v.emplace_back(&k, &n);
    std::stable_sort(v.begin(), v.end(), [](const Entry& a, const Entry& b) {
      return a.first->source().begin < b.first->source().begin;
    });
    return v;
  }

  static int key_line(const toml::key& k, const toml::node& n) {
    const int l = static_cast<int>(k.source().begin.line);
    return l != 0 ? l : line_of(n);
  }

  bool unknown(const toml::key& key, const toml::node& node,
               const std::vector<std::string_view>& known, std::string_view where) {
    return fail(key_line(key, node), "unknown key '" + std::string(key.str()) + "' " +
                                         std::string(where) + " (known: " + join(known) + ")");
  }

  bool get_bool(const toml::node& n, std::string_view name, bool* out) {
    if (const auto* b = n.as_boolean()) {
      *out = b->get();
      return true;
    }
    return fail(n, "'" + std::string(name) + "' must be true or false, got " + type_name(n));
  }

  bool get_int(const toml::node& n, std::string_view name, int lo, int hi, int* out) {
    const auto* i = n.as_integer();
    if (i == nullptr) {
      return fail(n, "'" + std::string(name) + "' must be an integer, got " + type_name(n));
    }
    const std::int64_t v = i->get();
    if (v < lo || v > hi) {
      return fail(n, "'" + std::string(name) + "' = " + std::to_string(v) + " is out of range (" +
                         std::to_string(lo) + ".." + std::to_string(hi) + ")");
    }
    *out = static_cast<int>(v);
    return true;
  }

  bool get_string(const toml::node& n, std::string_view name, std::string* out, bool allow_empty) {
    const auto* s = n.as_string();
    if (s == nullptr) {
      return fail(n, "'" + std::string(name) + "' must be a string, got " + type_name(n));
    }
    if (!allow_empty && s->get().empty()) {
      return fail(n, "'" + std::string(name) + "' must not be empty");
    }
    *out = s->get();
    return true;
  }

  // The name becomes a run-directory component and a Prometheus label value,
  // so it is restricted to characters that are safe in both.
  bool get_name(const toml::node& n, std::string* out) {
    if (!get_string(n, "name", out, /*allow_empty=*/false)) return false;
    std::string why;
    if (!valid_scenario_name(*out, &why)) return fail(n, "'name' = \"" + *out + "\" " + why);
    return true;
  }

  bool get_string_list(const toml::node& n, std::string_view name, std::size_t max,
                       std::vector<std::string>* out) {
    const auto* a = n.as_array();
    if (a == nullptr) {
      return fail(n,
                  "'" + std::string(name) + "' must be an array of strings, got " + type_name(n));
    }
    if (a->size() > max) {
      return fail(n, "'" + std::string(name) + "' has " + std::to_string(a->size()) +
                         " entries, at most " + std::to_string(max) + " allowed");
    }
    out->clear();
    for (const auto& e : *a) {
      std::string s;
      if (!get_string(e, std::string(name) + " entry", &s, /*allow_empty=*/false)) return false;
      out->push_back(std::move(s));
    }
    return true;
  }

  // invariants / expect_reached: ids checked by the caller against its
  // registries; here only shape. An explicit empty list is refused because it
  // reads as "check nothing" while the struct's empty means "check all".
  bool get_id_list(const toml::node& n, std::string_view name, std::vector<std::string>* out) {
    if (!get_string_list(n, name, 1024, out)) return false;
    if (out->empty()) {
      return fail(n, "'" + std::string(name) +
                         "' is empty; list at least one id, or omit the key for the default");
    }
    std::set<std::string> seen;
    for (std::size_t i = 0; i < out->size(); ++i) {
      if (!seen.insert((*out)[i]).second) {
        return fail(*n.as_array()->get(i),
                    "'" + std::string(name) + "' lists \"" + (*out)[i] + "\" twice");
      }
    }
    return true;
  }

  static bool known_invariant(const std::string& id) {
    for (const auto& c : checker_registry()) {
      if (c.invariant == id) return true;
    }
    return false;
  }

  static std::string invariant_ids() {
    std::vector<std::string> ids;
    for (const auto& c : checker_registry()) ids.push_back(c.invariant);
    std::sort(ids.begin(), ids.end());
    std::string out;
    for (const auto& id : ids) out += (out.empty() ? "" : ", ") + id;
    return out;
  }

  bool get_invariant_list(const toml::node& n, std::string_view name,
                          std::vector<std::string>* out) {
    if (!get_id_list(n, name, out)) return false;
    for (std::size_t i = 0; i < out->size(); ++i) {
      if (!known_invariant((*out)[i])) {
        return fail(*n.as_array()->get(i), "'" + std::string(name) + "' names unknown invariant \"" +
                                              (*out)[i] + "\" (known: " + invariant_ids() + ")");
      }
    }
    return true;
  }

  // With `alternatives`, an entry may be "a|b": either state will do.
  bool get_state_list(const toml::node& n, std::string_view name, std::vector<std::string>* out,
                      bool alternatives = false) {
    if (!get_id_list(n, name, out)) return false;
    for (std::size_t i = 0; i < out->size(); ++i) {
      std::vector<std::string> states;
      const std::string& entry = (*out)[i];
      if (alternatives) {
        for (std::size_t at = 0;;) {
          std::size_t bar = entry.find('|', at);
          states.push_back(entry.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
          if (bar == std::string::npos) break;
          at = bar + 1;
        }
      } else {
        states.push_back(entry);
      }
      for (const auto& state : states) {
        std::string why;
        if (!known_state_name(state, &why)) {
          return fail(*n.as_array()->get(i), "'" + std::string(name) + "' names \"" + state +
                                                "\", which no trial can reach: " + why);
        }
      }
    }
    return true;
  }

  // [excuse]  "cleanup.no-leak" = "why this invariant means nothing here"
  bool parse_excuses(const toml::node& n, Scenario* out) {
    const auto* t = n.as_table();
    if (t == nullptr) {
      return fail(n, "'excuse' must be a table ([excuse], \"invariant\" = \"reason\"), got " +
                         std::string(type_name(n)));
    }
    for (const auto& [key, node] : sorted(*t)) {
      const std::string id(key->str());
      if (!known_invariant(id)) {
        return fail(key_line(*key, *node), "[excuse] names unknown invariant \"" + id +
                                               "\" (known: " + invariant_ids() + ")");
      }
      std::string reason;
      if (!get_string(*node, "excuse." + id, &reason, /*allow_empty=*/true)) return false;
      if (trim(reason).empty()) {
        return fail(*node, "[excuse] \"" + id +
                               "\" needs a reason: say why this invariant means nothing in this "
                               "scenario (it is shown in every report)");
      }
      out->excuses[id] = reason;
    }
    return true;
  }

  // The value as the user wrote it, for messages: "20m" or 1200.
  static std::string literal(const toml::node& n) {
    if (const auto* s = n.as_string()) return "\"" + s->get() + "\"";
    if (const auto* i = n.as_integer()) return std::to_string(i->get());
    return type_name(n);
  }

  // A range "a-b" (a bare left number borrows b's unit: "0-20ms"), a single
  // duration string "a" (min == max), or an integer number of milliseconds.
  // Checks shape only; callers check bounds.
  bool get_range_value(const toml::node& n, std::string_view name, MsRange* out) {
    const std::string examples =
        "(expected e.g. \"250ms\", \"1.5s\", \"2m\", \"0-20ms\", \"10ms-2s\", or an integer "
        "number of milliseconds)";
    if (const auto* i = n.as_integer()) {
      if (i->get() < 0 || i->get() > std::int64_t{24} * 3600 * 1000) {
        return fail(n, "'" + std::string(name) + "' = " + std::to_string(i->get()) +
                           " is not a valid number of milliseconds");
      }
      out->min = out->max = Ms(i->get());
      return true;
    }
    const auto* s = n.as_string();
    if (s == nullptr) {
      return fail(n, "'" + std::string(name) + "' must be a duration, got " + type_name(n) + " " +
                         examples);
    }
    const std::string_view text = s->get();
    const auto bad = [&](const std::string& why) {
      return fail(n, "'" + std::string(name) + "' = \"" + std::string(text) + "\": " + why + " " +
                         examples);
    };
    const std::size_t dash = text.find('-');
    std::string why;
    std::int64_t lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      std::string_view unit;
      if (!parse_duration_token(trim(text), &lo, &unit, &why)) return bad(why);
      if (unit.empty()) return bad("missing unit");
      hi = lo;
    } else {
      const std::string_view left = trim(text.substr(0, dash));
      const std::string_view right = trim(text.substr(dash + 1));
      if (right.find('-') != std::string_view::npos) return bad("more than one '-'");
      std::string_view lunit, runit;
      if (!parse_duration_token(left, &lo, &lunit, &why)) return bad(why);
      if (!parse_duration_token(right, &hi, &runit, &why)) return bad(why);
      if (runit.empty()) return bad("missing unit");
      if (lunit.empty() && !apply_unit(left, runit, &lo, &why)) return bad(why);
      if (lo > hi) return bad("the range is reversed (min > max)");
    }
    out->min = Ms(lo);
    out->max = Ms(hi);
    return true;
  }

  // A jitter/hold range with both ends in [0, max].
  bool get_range(const toml::node& n, std::string_view name, Ms max, MsRange* out) {
    MsRange r;
    if (!get_range_value(n, name, &r)) return false;
    if (r.max > max) {
      return fail(n, "'" + std::string(name) + "' = " + literal(n) + " is out of range (0.." +
                         fmt_ms(max) + ")");
    }
    *out = r;
    return true;
  }

  // A single duration within [lo, hi]; ranges are refused.
  bool get_duration(const toml::node& n, std::string_view name, Ms lo, Ms hi, Ms* out) {
    if (const auto* s = n.as_string(); s != nullptr && s->get().find('-') != std::string::npos) {
      return fail(n, "'" + std::string(name) + "' = \"" + s->get() +
                         "\" must be a single duration, not a range");
    }
    MsRange r;
    if (!get_range_value(n, name, &r)) return false;
    if (r.min < lo || r.min > hi) {
      return fail(n, "'" + std::string(name) + "' = " + literal(n) + " is out of range (" +
                         fmt_ms(lo) + ".." + fmt_ms(hi) + ")");
    }
    *out = r.min;
    return true;
  }

  bool parse_deadlines(const toml::node& n, Scenario* out) {
    const auto* t = n.as_table();
    if (t == nullptr)
      return fail(n, "'deadlines' must be a table ([deadlines]), got " + std::string(type_name(n)));
    for (const auto& [key, node] : sorted(*t)) {
      Ms* dst = nullptr;
      if (key->str() == "acquire") {
        dst = &out->acquire_deadline;
      } else if (key->str() == "barrier") {
        dst = &out->barrier_deadline;
      } else if (key->str() == "liveness") {
        dst = &out->liveness;
      } else if (key->str() == "release") {
        dst = &out->release;
      } else if (key->str() == "start") {
        dst = &out->start;
      } else if (key->str() == "cleanup") {
        dst = &out->cleanup;
      } else if (key->str() == "spin") {
        dst = &out->spin;
      } else {
        return unknown(*key, *node, kDeadlineKeys, "in [deadlines]");
      }
      if (!get_duration(*node, "deadlines." + std::string(key->str()), kMinDeadline, kMaxDeadline,
                        dst)) {
        return false;
      }
    }
    return true;
  }

  bool parse_workload(const toml::node& n, Workload* w) {
    const auto* t = n.as_table();
    if (t == nullptr) {
      return fail(n,
                  "'workload' must be a table ([job.workload]), got " + std::string(type_name(n)));
    }
    const toml::node* clean_between = nullptr;
    for (const auto& [key, node] : sorted(*t)) {
      const std::string_view k = key->str();
      bool ok = true;
      if (k == "acquire") {
        ok = get_bool(*node, "acquire", &w->acquire);
      } else if (k == "rounds") {
        ok = get_int(*node, "rounds", 0, kMaxRounds, &w->rounds);
      } else if (k == "round_jitter") {
        ok = get_range(*node, "round_jitter", kMaxJitter, &w->round_jitter);
      } else if (k == "hold") {
        ok = get_range(*node, "hold", kMaxJitter, &w->hold);
      } else if (k == "release") {
        ok = get_bool(*node, "release", &w->release);
      } else if (k == "segments") {
        ok = get_string_list(*node, "segments", 64, &w->segments);
      } else if (k == "clean_before") {
        ok = get_bool(*node, "clean_before", &w->clean_before);
      } else if (k == "clean_after") {
        ok = get_bool(*node, "clean_after", &w->clean_after);
      } else if (k == "clean_between") {
        clean_between = node;
        ok = get_bool(*node, "clean_between", &w->clean_between);
      } else if (k == "datasets") {
        ok = get_int(*node, "datasets", 1, kMaxDatasets, &w->datasets);
      } else if (k == "barrier_liveness") {
        ok = get_duration(*node, "barrier_liveness", kMinDeadline, kMaxDeadline,
                          &w->barrier_liveness);
      } else if (k == "retries") {
        ok = get_int(*node, "retries", 0, kMaxRetries, &w->retries);
      } else if (k == "repeat_for") {
        ok = get_duration(*node, "repeat_for", kMinDeadline, kMaxDeadline, &w->repeat_for);
      } else {
        ok = unknown(*key, *node, kWorkloadKeys, "in [job.workload]");
      }
      if (!ok) return false;
    }
    // Between the first dataset and the second: with one dataset (or none
    // acquired) there is no between, and the step would silently not run.
    if (w->clean_between && w->datasets < 2) {
      return fail(*clean_between, "'clean_between' = true needs datasets >= 2 (it runs between the first "
                                  "dataset's construction and the second's), got datasets = " +
                                      std::to_string(w->datasets));
    }
    if (w->clean_between && !w->acquire) {
      return fail(*clean_between, "'clean_between' = true with acquire = false: no dataset is constructed, "
                                  "so there is no between");
    }
    return true;
  }

  bool parse_loader(const toml::node& n, Loader* l) {
    const auto* t = n.as_table();
    if (t == nullptr) return fail(n, "'loader' must be a table ([job.loader]), got " + std::string(type_name(n)));
    for (const auto& [key, node] : sorted(*t)) {
      const std::string_view k = key->str();
      bool ok = true;
      if (k == "workers") {
        ok = get_int(*node, "workers", 0, kMaxLoaderWorkers, &l->workers);
      } else if (k == "start") {
        std::string v;
        ok = get_string(*node, "start", &v, false);
        if (ok && v != "fork" && v != "spawn") ok = fail(*node, "'start' = \"" + v + "\" must be \"fork\" or \"spawn\"");
        l->fork = v == "fork";
      } else if (k == "barrier") {
        std::string v;
        ok = get_string(*node, "barrier", &v, false);
        if (ok && v != "workers" && v != "rank") {
          ok = fail(*node, "'barrier' = \"" + v + "\" must be \"workers\" (the loader workers enter it) or \"rank\"");
        }
        l->enter_barrier = v == "workers";
      } else if (k == "work") {
        ok = get_range(*node, "work", kMaxJitter, &l->work);
      } else {
        ok = unknown(*key, *node, kLoaderKeys, "in [job.loader]");
      }
      if (!ok) return false;
    }
    return true;
  }

  bool parse_launcher(const toml::node& n, Launcher* l) {
    const auto* t = n.as_table();
    if (t == nullptr) return fail(n, "'launcher' must be a table ([job.launcher]), got " + std::string(type_name(n)));
    l->kind = "torchrun";
    for (const auto& [key, node] : sorted(*t)) {
      const std::string_view k = key->str();
      bool ok = true;
      if (k == "kind") {
        ok = get_string(*node, "kind", &l->kind, false);
        if (ok && l->kind != "torchrun") ok = fail(*node, "'kind' = \"" + l->kind + "\": the only launcher is \"torchrun\"");
      } else if (k == "max_restarts") {
        ok = get_int(*node, "max_restarts", 0, 10, &l->max_restarts);
      } else if (k == "run_id") {
        std::string v;
        ok = get_string(*node, "run_id", &v, false);
        if (ok && v != "unique" && v != "default") {
          ok = fail(*node, "'run_id' = \"" + v + "\" must be \"unique\" (one --rdzv_id per job) or \"default\" (torchrun's own)");
        }
        l->default_run_id = v == "default";
      } else if (k == "teardown") {
        ok = get_duration(*node, "teardown", kMinDeadline, kMaxDeadline, &l->teardown);
      } else {
        ok = unknown(*key, *node, kLauncherKeys, "in [job.launcher]");
      }
      if (!ok) return false;
    }
    return true;
  }

  bool parse_lws(const toml::node& n, JobSpec* job) {
    if (const auto* s = n.as_string()) {
      if (s->get() == "set") {
        job->lws_mode = LwsMode::kSet;
        return true;
      }
      if (s->get() == "missing") {
        job->lws_mode = LwsMode::kMissing;
        return true;
      }
      return fail(n, "'local_world_size' = \"" + s->get() +
                         "\" must be \"set\", \"missing\" or an integer (the wrong value rank 0 "
                         "reports)");
    }
    if (n.is_integer()) {
      int v = 0;
      if (!get_int(n, "local_world_size", 0, kMaxLwsWrong, &v)) return false;
      job->lws_mode = LwsMode::kWrong;
      job->lws_wrong = v;
      return true;
    }
    return fail(n, "'local_world_size' must be \"set\", \"missing\" or an integer, got " +
                       std::string(type_name(n)));
  }

  bool parse_job(const toml::table& t, Scenario* out) {
    JobSpec job;
    job.line = line_of(t);
    int count = 1;
    const toml::node* lws = nullptr;
    const toml::node* loader = nullptr;
    for (const auto& [key, node] : sorted(t)) {
      const std::string_view k = key->str();
      bool ok = true;
      if (k == "count") {
        ok = get_int(*node, "count", 1, kMaxCount, &count);
      } else if (k == "ranks") {
        ok = get_int(*node, "ranks", 1, kMaxRanks, &job.ranks);
      } else if (k == "dirs") {
        ok = get_string_list(*node, "dirs", kMaxDirs, &job.dirs);
      } else if (k == "remote") {
        ok = get_bool(*node, "remote", &job.remote);
      } else if (k == "start_jitter") {
        ok = get_range(*node, "start_jitter", kMaxJitter, &job.start_jitter);
      } else if (k == "local_world_size") {
        lws = node;
        ok = parse_lws(*node, &job);
      } else if (k == "workload") {
        ok = parse_workload(*node, &job.workload);
      } else if (k == "loader") {
        loader = node;
        ok = parse_loader(*node, &job.loader);
      } else if (k == "launcher") {
        ok = parse_launcher(*node, &job.launcher);
      } else if (k == "root_suffix") {
        ok = get_string(*node, "root_suffix", &job.root_suffix, false);
        if (ok && (job.root_suffix.size() > 32 || job.root_suffix.back() != '.' ||
                   job.root_suffix.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                       std::string::npos)) {
          ok = fail(*node, "'root_suffix' = \"" + job.root_suffix +
                               "\" must be 1..32 of [A-Za-z0-9._-] ending in '.', as a name root does");
        }
      } else {
        ok = unknown(*key, *node, kJobKeys, "in [job]");
      }
      if (!ok) return false;
    }
    // A "wrong" local world size equal to the real one would silently test
    // the correct configuration.
    if (job.lws_mode == LwsMode::kWrong && job.lws_wrong == job.ranks) {
      return fail(*lws, "'local_world_size' = " + std::to_string(job.lws_wrong) +
                            " equals ranks; use \"set\" for a correct value, or a different "
                            "integer to inject a wrong one");
    }
    if (loader != nullptr && job.loader.workers > 0 && job.loader.enter_barrier &&
        job.ranks * job.loader.workers > kMaxRanks) {
      return fail(*loader, "ranks x loader workers = " + std::to_string(job.ranks * job.loader.workers) +
                               " barrier participants, at most " + std::to_string(kMaxRanks));
    }
    if (loader != nullptr && job.loader.workers > 0 && !job.loader.fork && !job.loader.enter_barrier) {
      return fail(*loader, "start = \"spawn\" with barrier = \"rank\": a spawned loader worker inherits "
                           "nothing of its rank, so it would only sleep; use start = \"fork\"");
    }
    if (static_cast<int>(out->jobs.size()) + count > kMaxJobs) {
      return fail(job.line, "too many jobs: " + std::to_string(out->jobs.size() + count) +
                                " after expanding count, at most " + std::to_string(kMaxJobs));
    }
    int total = 0;
    for (const auto& j : out->jobs) total += j.ranks;
    total += count * job.ranks;
    if (total > kMaxTotalRanks) {
      return fail(job.line, "too many ranks: " + std::to_string(total) +
                                " over all jobs, at most " + std::to_string(kMaxTotalRanks));
    }
    for (int i = 0; i < count; ++i) out->jobs.push_back(job);
    return true;
  }

  bool parse_jobs(const toml::node& n, Scenario* out) {
    const auto* a = n.as_array();
    if (a == nullptr) {
      return fail(n,
                  "'job' must be an array of tables ([[job]]), got " + std::string(type_name(n)));
    }
    for (const auto& e : *a) {
      const auto* t = e.as_table();
      if (t == nullptr) {
        return fail(e,
                    "each 'job' entry must be a table ([[job]]), got " + std::string(type_name(e)));
      }
      if (!parse_job(*t, out)) return false;
    }
    return true;
  }

  bool to_json(const toml::node& n, std::string_view name, nlohmann::json* out) {
    switch (n.type()) {
      case toml::node_type::string:
        *out = n.as_string()->get();
        return true;
      case toml::node_type::integer:
        *out = n.as_integer()->get();
        return true;
      case toml::node_type::boolean:
        *out = n.as_boolean()->get();
        return true;
      case toml::node_type::floating_point: {
        const double d = n.as_floating_point()->get();
        if (!std::isfinite(d)) {
          return fail(n, "fault parameter '" + std::string(name) + "' must be finite");
        }
        *out = d;
        return true;
      }
      case toml::node_type::array: {
        *out = nlohmann::json::array();
        for (const auto& e : *n.as_array()) {
          nlohmann::json j;
          if (!to_json(e, name, &j)) return false;
          out->push_back(std::move(j));
        }
        return true;
      }
      case toml::node_type::table: {
        *out = nlohmann::json::object();
        for (const auto& [key, node] : sorted(*n.as_table())) {
          nlohmann::json j;
          if (!to_json(*node, std::string(name) + "." + std::string(key->str()), &j)) return false;
          (*out)[std::string(key->str())] = std::move(j);
        }
        return true;
      }
      default:
        return fail(n, "fault parameter '" + std::string(name) + "' is " + type_name(n) +
                           "; dates and times are not supported");
    }
  }

  bool parse_fault(const toml::table& t, Scenario* out) {
    FaultSpec f;
    f.line = line_of(t);
    f.params = nlohmann::json::object();
    const toml::node* kind = t.get("kind");
    if (kind == nullptr) return fail(f.line, "[[fault]] has no 'kind' (e.g. kind = \"sigkill\")");
    if (!get_string(*kind, "kind", &f.kind, /*allow_empty=*/false)) return false;
    for (const auto& [key, node] : sorted(t)) {
      const std::string k(key->str());
      if (k == "kind") continue;
      nlohmann::json j;
      if (!to_json(*node, k, &j)) return false;
      f.params[k] = std::move(j);
      f.param_lines[k] = key_line(*key, *node);
    }
    out->faults.push_back(std::move(f));
    return true;
  }

  bool parse_faults(const toml::node& n, Scenario* out) {
    const auto* a = n.as_array();
    if (a == nullptr) {
      return fail(
          n, "'fault' must be an array of tables ([[fault]]), got " + std::string(type_name(n)));
    }
    for (const auto& e : *a) {
      const auto* t = e.as_table();
      if (t == nullptr) {
        return fail(
            e, "each 'fault' entry must be a table ([[fault]]), got " + std::string(type_name(e)));
      }
      if (!parse_fault(*t, out)) return false;
    }
    return true;
  }

  std::string file_;
  ScenarioError err_;
};

}  // namespace

bool known_state_name(const std::string& state, std::string* why) {
  auto word = [](std::string_view w) {
    return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
  };
  std::string_view s = state;
  if (s == "subject-unavailable") return true;
  if (s.starts_with("fault:")) {
    if (word(s.substr(6))) return true;
    *why = "expected fault:<kind>";
    return false;
  }
  if (s.starts_with("error:")) {
    std::string_view rest = s.substr(6);
    auto colon = rest.find(':');
    if (colon != std::string_view::npos && word(rest.substr(0, colon)) &&
        word(rest.substr(colon + 1))) {
      return true;
    }
    *why = "expected error:<op>:<code>, e.g. error:acquire:in-use";
    return false;
  }
  for (const auto& c : checker_registry()) {
    for (const auto& r : c.reached_states) {
      if (r == state) return true;
    }
  }
  *why = "not a state any checker reports (see `shmstress list`), nor fault:<kind>, "
         "error:<op>:<code> or subject-unavailable";
  return false;
}

bool valid_scenario_name(std::string_view name, std::string* why) {
  if (name.empty() || name.size() > 200) {
    *why = "must be 1 to 200 characters (it names the run directory)";
    return false;
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) {
      *why = "may only contain letters, digits, '-', '_' and '.' (it names the run directory)";
      return false;
    }
  }
  if (name == "." || name == "..") {
    *why = "must not be \".\" or \"..\" (it names the run directory)";
    return false;
  }
  // The run dir's own files sit beside the scenarios' dirs (docs/reports.md).
  if (name.front() == '.') {
    *why = "must not start with '.' (the run directory keeps its own lock and temp files so)";
    return false;
  }
  if (name == "summary.json" || name == "report.html") {
    *why = "is the name of one of the run directory's own reports (its trials would take its place)";
    return false;
  }
  return true;
}

std::string printable_text(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  auto escape = [&](unsigned char u) {
    out += "\\x";
    out += kHex[u >> 4];
    out += kHex[u & 15];
  };
  for (std::size_t i = 0; i < s.size();) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u < 0x80) {
      if (u < 0x20 || u == 0x7f) escape(u); else out += s[i];
      ++i;
      continue;
    }
    // UTF-8: a valid sequence is kept, except the C1 controls U+0080-U+009F
    // (U+009B is a terminal's CSI); a byte that starts no valid sequence is
    // escaped on its own.
    const std::size_t len = u >= 0xf0 && u <= 0xf4 ? 4 : u >= 0xe0 ? 3 : u >= 0xc2 && u <= 0xdf ? 2 : 0;
    bool valid = len > 0 && i + len <= s.size();
    std::uint32_t cp = len == 2 ? u & 0x1f : len == 3 ? u & 0x0f : u & 0x07;
    for (std::size_t k = 1; valid && k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      valid = (c & 0xc0) == 0x80;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (valid && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff))))
      valid = false;  // overlong, a surrogate, or past Unicode
    if (!valid) {
      escape(u);
      ++i;
    } else if (cp <= 0x9f) {
      out += "\\u00";
      out += kHex[cp >> 4];
      out += kHex[cp & 15];
      i += len;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string ScenarioError::to_string() const {
  std::string out = file.empty() ? "<scenario>" : file;
  if (line > 0) out += ":" + std::to_string(line);
  return printable_text(out + ": " + message);
}

std::optional<Scenario> parse_scenario(const std::string& text, const std::string& file,
                                       ScenarioError* err) {
  ScenarioError local;
  if (err == nullptr) err = &local;
  *err = ScenarioError{file, 0, ""};
  try {
    toml::table root;
    try {
      root = toml::parse(text, file);
    } catch (const toml::parse_error& e) {
      err->line = static_cast<int>(e.source().begin.line);
      err->message = "TOML syntax error: " + std::string(e.description());
      return std::nullopt;
    }
    Scenario sc;
    sc.file = file;
    sc.name = std::filesystem::path(file).stem().string();
    sc.raw_toml = text;
    Parser p(file);
    if (!p.parse(root, &sc)) {
      *err = p.error();
      return std::nullopt;
    }
    // Without `name`, the file's stem names the run directory: "...toml"
    // would put trials outside it.
    if (std::string why; !root.contains("name") && !valid_scenario_name(sc.name, &why)) {
      err->message = "the file name's stem \"" + sc.name + "\" " + why + "; set 'name'";
      return std::nullopt;
    }
    return sc;
  } catch (const std::exception& e) {
    err->line = 0;
    err->message = std::string("internal error while parsing: ") + e.what();
    return std::nullopt;
  } catch (...) {
    err->line = 0;
    err->message = "internal error while parsing";
    return std::nullopt;
  }
}

std::optional<Scenario> load_scenario(const std::string& path, ScenarioError* err) {
  ScenarioError local;
  if (err == nullptr) err = &local;
  *err = ScenarioError{path, 0, ""};
  std::string why;
  std::optional<std::string> text = read_regular_file(path, kMaxUserFileBytes, &why);
  if (!text) {
    err->message = "cannot read scenario file: " + why;
    return std::nullopt;
  }
  return parse_scenario(*text, path, err);
}

}  // namespace harness
