// JUnit XML: what CI servers (Jenkins' junit step, GitLab's
// artifacts:reports:junit) show as test results. docs/reports.md says how
// verdicts map onto failure / skipped / error and why.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>

#include "reports/reports.h"

namespace reports {
namespace {

using harness::Verdict;

constexpr std::size_t kMaxTrialsListed = 10;    // per testcase; the rest are counted
constexpr std::size_t kMaxProblemsListed = 20;  // per trial; verdict.json has them all

// Decodes one UTF-8 sequence at s[i]; returns the code point and advances i,
// or returns -1 (and advances one byte) for a malformed sequence.
long decode_utf8(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  int len = b0 < 0x80             ? 1
            : (b0 & 0xE0) == 0xC0 ? 2
            : (b0 & 0xF0) == 0xE0 ? 3
            : (b0 & 0xF8) == 0xF0 ? 4
                                  : 0;
  if (len == 0 || i + len > s.size()) {
    ++i;
    return -1;
  }
  long cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return -1;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr long kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {  // overlong, surrogate
    ++i;
    return -1;
  }
  i += len;
  return cp;
}

bool xml_char(long cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
         (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

std::string attr(std::string_view s) { return xml_escape(s, true); }
std::string text(std::string_view s) { return xml_escape(s, false); }

// What happened to one invariant in one scenario, over all its trials.
struct Cell {
  std::vector<const harness::TrialResult*> invalid, unknown;
  std::map<const harness::TrialResult*, const harness::CheckResult*> check;
};

struct Suite {
  std::vector<const harness::TrialResult*> trials;
  std::map<std::string, Cell> invariants;
  double seconds = 0;
};

std::string trial_block(const harness::TrialResult& t, const harness::CheckResult& c) {
  std::string s = fmt::format("trial {} (seed {})\n", t.trial, t.seed);
  for (std::size_t i = 0; i < c.problems.size() && i < kMaxProblemsListed; ++i)
    s += "  " + c.problems[i] + "\n";
  if (c.problems.size() > kMaxProblemsListed) {
    s += fmt::format("  ({} more problems in verdict.json)\n",
                     c.problems.size() - kMaxProblemsListed);
  }
  if (!t.dir.empty()) s += "  trial dir: " + t.dir + "\n";
  if (!t.reproduce.empty()) s += "  reproduce: " + t.reproduce + "\n";
  return s;
}

std::string trials_text(const std::vector<const harness::TrialResult*>& trials, const Cell& cell) {
  std::string s;
  for (std::size_t i = 0; i < trials.size() && i < kMaxTrialsListed; ++i) {
    s += "\n" + trial_block(*trials[i], *cell.check.at(trials[i]));
  }
  if (trials.size() > kMaxTrialsListed) {
    s += fmt::format("\n({} more trials: see summary.json)\n", trials.size() - kMaxTrialsListed);
  }
  return s;
}

std::string testcase(const std::string& classname, const std::string& name,
                     const std::string& children) {
  std::string open =
      fmt::format("    <testcase classname=\"{}\" name=\"{}\"", attr(classname), attr(name));
  return children.empty() ? open + "/>\n" : open + ">\n" + children + "    </testcase>\n";
}

std::string secs(double s) { return fmt::format("{:.3f}", s < 0 ? 0.0 : s); }

}  // namespace

std::string xml_escape(std::string_view s, bool attribute) {
  std::string out;
  out.reserve(s.size() + 16);
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t at = i;
    long cp = decode_utf8(s, i);
    if (cp < 0 || !xml_char(cp)) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      continue;
    }
    switch (cp) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += attribute ? "&quot;" : "\"";
        break;
      case '\'':
        out += attribute ? "&apos;" : "'";
        break;
      // Parsers normalise raw CR (and, in attributes, TAB and LF) away.
      case '\r':
        out += "&#13;";
        break;
      case '\n':
        out += attribute ? "&#10;" : "\n";
        break;
      case '\t':
        out += attribute ? "&#9;" : "\t";
        break;
      default:
        out.append(s.substr(at, i - at));
    }
  }
  return out;
}

std::string junit_xml(const harness::RunResult& r) {
  std::map<std::string, Suite> suites;
  for (const auto& t : r.trials) {
    Suite& s = suites[t.scenario];
    s.trials.push_back(&t);
    s.seconds += t.seconds;
    for (const auto& c : t.checks) {
      Cell& cell = s.invariants[c.invariant];
      cell.check[&t] = &c;
      if (c.verdict == Verdict::kInvalid) cell.invalid.push_back(&t);
      if (c.verdict == Verdict::kUnknown) cell.unknown.push_back(&t);
    }
  }
  const auto missing = r.missing_reached();

  int all_tests = 0, all_failures = 0, all_errors = 0;
  std::string body;
  for (const auto& [name, s] : suites) {
    int tests = 0, failures = 0, errors = 0, skipped = 0;
    std::string cases;
    const std::size_t n = s.trials.size();
    for (const auto& [inv, cell] : s.invariants) {
      ++tests;
      std::string children;
      if (!cell.invalid.empty()) {
        ++failures;
        const auto& first = *cell.invalid.front();
        std::string msg =
            fmt::format("{} violated in {} of {} trials", inv, cell.invalid.size(), n);
        if (!first.reproduce.empty()) msg += "; reproduce: " + first.reproduce;
        std::string body_text = fmt::format("{} violated in {} of {} trials of {} (run seed {}).\n",
                                            inv, cell.invalid.size(), n, name, r.seed);
        body_text += trials_text(cell.invalid, cell);
        if (!cell.unknown.empty()) {
          body_text += fmt::format("\nAlso inconclusive in {} trials.\n", cell.unknown.size());
        }
        children = fmt::format("      <failure type=\"invalid\" message=\"{}\">{}</failure>\n",
                               attr(msg), text(body_text));
      } else if (!cell.unknown.empty()) {
        ++skipped;
        const auto& first = *cell.unknown.front();
        const auto& problems = cell.check.at(&first)->problems;
        std::string msg = fmt::format("inconclusive in {} of {} trials", cell.unknown.size(), n);
        if (!problems.empty()) msg += ": " + problems.front();
        std::string body_text =
            fmt::format("{} could not be decided in {} of {} trials of {} (run seed {}).\n", inv,
                        cell.unknown.size(), n, name, r.seed);
        body_text += trials_text(cell.unknown, cell);
        children = fmt::format("      <skipped type=\"inconclusive\" message=\"{}\">{}</skipped>\n",
                               attr(msg), text(body_text));
      }
      cases += testcase(name, inv, children);
    }
    // Harness failures are not any invariant's verdict: JUnit's <error>.
    std::vector<const harness::TrialResult*> broken;
    for (const auto* t : s.trials) {
      if (t->harness_error) broken.push_back(t);
    }
    if (!broken.empty()) {
      ++tests, ++errors;
      std::string body_text;
      for (const auto* t : broken) {
        body_text +=
            fmt::format("trial {} (seed {}): {}\n", t->trial, t->seed, t->harness_error_text);
        if (!t->dir.empty()) body_text += "  trial dir: " + t->dir + "\n";
      }
      cases += testcase(
          name, "harness",
          fmt::format("      <error type=\"harness-error\" message=\"{}\">{}</error>\n",
                      attr(fmt::format("the harness failed in {} of {} trials: {}", broken.size(),
                                       n, broken.front()->harness_error_text)),
                      text(body_text)));
    }
    // A subject that could not run here checked nothing: say so, never a silent pass.
    std::vector<const harness::TrialResult*> unavailable;
    for (const auto* t : s.trials) {
      if (!t->unavailable.empty()) unavailable.push_back(t);
    }
    if (!unavailable.empty()) {
      ++tests, ++skipped;
      cases += testcase(
          name, "subject",
          fmt::format("      <skipped type=\"unavailable\" message=\"{}\">{}</skipped>\n",
                      attr(fmt::format("subject {} not available in {} of {} trials: {}", r.subject,
                                       unavailable.size(), n, unavailable.front()->unavailable)),
                      text(fmt::format("No invariant was checked in those trials.\n"))));
    }
    if (auto it = r.expect_reached.find(name); it != r.expect_reached.end()) {
      ++tests;
      std::vector<std::string> never;
      for (const auto& m : missing) {
        if (m.starts_with(name + ": ")) never.push_back(m.substr(name.size() + 2));
      }
      std::string children;
      if (!never.empty()) {
        ++skipped;
        std::string msg = fmt::format("never reached: {}", fmt::join(never, ", "));
        children = fmt::format(
            "      <skipped type=\"inconclusive\" message=\"{}\">{} trials never reached the "
            "states this "
            "scenario targets: {}.\nTheir invariants held there vacuously; run more "
            "trials.</skipped>\n",
            attr(msg), n, text(fmt::format("{}", fmt::join(never, ", "))));
      }
      cases += testcase(name, "expect_reached", children);
    }
    all_tests += tests, all_failures += failures, all_errors += errors;

    const auto* first = s.trials.front();
    std::string props;
    auto prop = [&](const std::string& k, const std::string& v) {
      props += fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", attr(k), attr(v));
    };
    prop("seed", std::to_string(r.seed));
    prop("trials", std::to_string(n));
    prop("subject", r.subject);
    prop("run_id", r.run_id);
    if (!first->scenario_file.empty()) prop("scenario_file", first->scenario_file);
    if (r.interrupted) prop("interrupted", "true");
    body += fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
        "time=\"{}\">\n"
        "    <properties>\n{}    </properties>\n{}  </testsuite>\n",
        attr(name), tests, failures, errors, skipped, secs(s.seconds), props, cases);
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"shmstress\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
      "time=\"{}\">\n{}</testsuites>\n",
      all_tests, all_failures, all_errors, secs(r.elapsed), body);
}

}  // namespace reports
