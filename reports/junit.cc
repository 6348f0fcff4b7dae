// JUnit XML: what CI servers (Jenkins' junit step, GitLab's
// artifacts:reports:junit) show as test results. docs/reports.md says how
// verdicts map onto failure / skipped / error and why.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>

#include "harness/triage.h"
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

// The listed trials in which one invariant was invalid (or unknown), each
// with its check.
using Listed = std::vector<std::pair<const harness::TrialResult*, const harness::CheckResult*>>;

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

// The first listed trials in detail; `total` counts them all, listed or not.
std::string trials_text(const Listed& trials, std::uint64_t total) {
  std::string s;
  std::size_t shown = 0;
  for (; shown < trials.size() && shown < kMaxTrialsListed; ++shown) {
    s += "\n" + trial_block(*trials[shown].first, *trials[shown].second);
  }
  if (total > shown) s += fmt::format("\n({} more trials: see summary.json)\n", total - shown);
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
  const auto missing = r.missing_reached();
  const auto ordered = buckets_in_order(r);
  const auto gone = r.known_not_recurred();

  int all_tests = 0, all_failures = 0, all_errors = 0;
  std::string body;
  for (const auto& [name, s] : r.tally.scenarios()) {
    int tests = 0, failures = 0, errors = 0, skipped = 0;
    std::string cases;
    const std::uint64_t n = s.trials;
    std::vector<const harness::TrialResult*> listed;
    for (const auto& t : r.listed) {
      if (t.scenario == name) listed.push_back(&t);
    }
    for (const auto& [inv, cell] : s.invariants) {
      ++tests;
      Listed invalid, unknown;
      for (const auto* t : listed) {
        for (const auto& c : t->checks) {
          if (c.invariant != inv) continue;
          if (c.verdict == Verdict::kInvalid) invalid.emplace_back(t, &c);
          if (c.verdict == Verdict::kUnknown) unknown.emplace_back(t, &c);
        }
      }
      // A violated invariant: one testcase per bucket (new: failure, known:
      // skipped), named "<invariant>/<hash>" so a CI's test history follows
      // each flaw across nights.
      std::vector<const harness::Bucket*> buckets;
      for (const auto* b : ordered) {
        if (b->scenario == name && b->invariant == inv) buckets.push_back(b);
      }
      if (!cell.excused.empty()) {
        // Excused: shown with its reason, never a failure.
        ++skipped;
        std::string msg = fmt::format("excused: {} ({} in {} of {} trials, not counted)", cell.excused,
                                      harness::verdict_name(cell.worst), cell.not_valid(), n);
        cases += testcase(name, inv,
                          fmt::format("      <skipped type=\"excused\" message=\"{}\">{}</skipped>\n", attr(msg),
                                      text("The scenario excuses " + inv + ": " + cell.excused + "\n")));
      } else if (cell.invalid > 0 && !buckets.empty()) {
        --tests;  // the invariant's own testcase gives way to its buckets'
        for (std::size_t k = 0; k < buckets.size(); ++k) {
          const harness::Bucket& b = *buckets[k];
          ++tests;
          Listed in_bucket;
          for (const auto& [t, c] : invalid) {
            for (const auto& f : harness::violation_fingerprints(t->scenario, *c)) {
              if (f.id == b.fingerprint) {
                in_bucket.emplace_back(t, c);
                break;
              }
            }
          }
          std::string body_text = fmt::format(
              "{} violated in {} of {} trials of {} (run seed {}), fingerprint {}{}.\n"
              "Problem: {}\nShape: {}\nTrials {}..{}; example trial {} (seed {}).\n",
              inv, b.trials, n, name, r.seed, b.fingerprint, b.known ? " (known)" : " (new)",
              b.example_problem, b.shape, b.first_trial, b.last_trial, b.example_trial, b.example_seed);
          if (b.known) body_text += "Known: " + b.known_reason + "\n";
          if (!b.shrunk.empty()) body_text += "Shrunk scenario: " + b.shrunk + "\n";
          if (!b.reproduce.empty()) body_text += "Reproduce: " + b.reproduce + "\n";
          body_text += trials_text(in_bucket, b.trials);
          if (k == 0 && cell.unknown > 0) {
            body_text += fmt::format("\nAlso inconclusive in {} trials.\n", cell.unknown);
          }
          std::string msg;
          std::string children;
          if (b.known) {
            ++skipped;
            msg = fmt::format("known failure, recurred in {} of {} trials: {}", b.trials, n, b.known_reason);
            children = fmt::format("      <skipped type=\"known\" message=\"{}\">{}</skipped>\n", attr(msg),
                                   text(body_text));
          } else {
            ++failures;
            msg = fmt::format("{} violated in {} of {} trials (new: {})", inv, b.trials, n, b.fingerprint);
            if (!b.reproduce.empty()) msg += "; reproduce: " + b.reproduce;
            children = fmt::format("      <failure type=\"invalid\" message=\"{}\">{}</failure>\n", attr(msg),
                                   text(body_text));
          }
          cases += testcase(name, inv + "/" + b.fingerprint.substr(b.fingerprint.rfind('/') + 1), children);
        }
      } else {
        std::string children;
        if (cell.invalid > 0) {  // every violation past the bucket cap: the invariant as a whole
          ++failures;
          std::string msg = fmt::format("{} violated in {} of {} trials", inv, cell.invalid, n);
          if (!invalid.empty() && !invalid.front().first->reproduce.empty()) {
            msg += "; reproduce: " + invalid.front().first->reproduce;
          }
          std::string body_text = fmt::format("{} violated in {} of {} trials of {} (run seed {}).\n",
                                              inv, cell.invalid, n, name, r.seed);
          body_text += trials_text(invalid, cell.invalid);
          if (cell.unknown > 0) {
            body_text += fmt::format("\nAlso inconclusive in {} trials.\n", cell.unknown);
          }
          children = fmt::format("      <failure type=\"invalid\" message=\"{}\">{}</failure>\n",
                                 attr(msg), text(body_text));
        } else if (cell.unknown > 0) {
          ++skipped;
          std::string msg = fmt::format("inconclusive in {} of {} trials", cell.unknown, n);
          if (!unknown.empty() && !unknown.front().second->problems.empty()) {
            msg += ": " + unknown.front().second->problems.front();
          }
          std::string body_text =
              fmt::format("{} could not be decided in {} of {} trials of {} (run seed {}).\n", inv,
                          cell.unknown, n, name, r.seed);
          body_text += trials_text(unknown, cell.unknown);
          children = fmt::format("      <skipped type=\"inconclusive\" message=\"{}\">{}</skipped>\n",
                                 attr(msg), text(body_text));
        }
        cases += testcase(name, inv, children);
      }
      // The baseline's known failures of this invariant that did not recur: passed.
      for (const auto* k : gone) {
        auto parts = harness::parse_fingerprint(k->fingerprint);
        if (!parts || parts->scenario != name || parts->invariant != inv) continue;
        ++tests;
        cases += testcase(name, inv + "/" + parts->hash,
                          fmt::format("      <system-out>{}</system-out>\n",
                                      text(fmt::format("Known failure {} did not recur in {} trials ({}).\n",
                                                       k->fingerprint, n, k->reason))));
      }
    }
    // Harness failures are not any invariant's verdict: JUnit's <error>.
    if (s.harness_errors > 0) {
      ++tests, ++errors;
      std::string body_text;
      std::uint64_t shown = 0;
      for (const auto* t : listed) {
        if (!t->harness_error) continue;
        ++shown;
        body_text +=
            fmt::format("trial {} (seed {}): {}\n", t->trial, t->seed, t->harness_error_text);
        if (!t->dir.empty()) body_text += "  trial dir: " + t->dir + "\n";
      }
      if (s.harness_errors > shown) {
        body_text += fmt::format("({} more trials: see summary.json)\n", s.harness_errors - shown);
      }
      cases += testcase(
          name, "harness",
          fmt::format("      <error type=\"harness-error\" message=\"{}\">{}</error>\n",
                      attr(fmt::format("the harness failed in {} of {} trials: {}", s.harness_errors,
                                       n, s.first_harness_error)),
                      text(body_text)));
    }
    // Events that did not fit the protocol: those trials decided nothing.
    if (s.history_error_trials > 0) {
      ++tests, ++errors;
      std::string body_text;
      std::uint64_t shown = 0;
      for (const auto* t : listed) {
        if (t->history_error_count == 0 || shown >= kMaxTrialsListed) continue;
        ++shown;
        body_text += fmt::format("trial {} (seed {}): {} history errors\n", t->trial, t->seed, t->history_error_count);
        for (const auto& e : t->history_errors) body_text += "  " + e + "\n";
        if (!t->dir.empty()) body_text += "  trial dir: " + t->dir + "\n";
      }
      if (s.history_error_trials > shown) {
        body_text += fmt::format("({} more trials: see summary.json)\n", s.history_error_trials - shown);
      }
      cases += testcase(
          name, "history",
          fmt::format("      <error type=\"history\" message=\"{}\">{}</error>\n",
                      attr(fmt::format("events that do not fit the worker protocol in {} of {} trials (each at best "
                                       "unknown): {}",
                                       s.history_error_trials, n, s.first_history_error)),
                      text(body_text)));
    }
    // A known-bad subject's scenario: caught for the reason it names, or not.
    if (!s.expected.empty()) {
      ++tests;
      std::string children;
      if (!s.expectation_met()) {
        ++skipped;
        children = fmt::format("      <skipped type=\"not-caught\" message=\"{}\"/>\n", attr(expectation_line(s)));
      }
      cases += testcase(name, "expect_violation", children);
    }
    // A subject that could not run here checked nothing: say so, never a silent pass.
    if (s.unavailable > 0) {
      ++tests, ++skipped;
      cases += testcase(
          name, "subject",
          fmt::format("      <skipped type=\"unavailable\" message=\"{}\">{}</skipped>\n",
                      attr(fmt::format("subject {} not available in {} of {} trials: {}", r.subject,
                                       s.unavailable, n, s.first_unavailable)),
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

    std::string props;
    auto prop = [&](const std::string& k, const std::string& v) {
      props += fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", attr(k), attr(v));
    };
    prop("seed", std::to_string(r.seed));
    prop("trials", std::to_string(n));
    prop("subject", r.subject);
    prop("run_id", r.run_id);
    if (!s.file.empty()) prop("scenario_file", s.file);
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
