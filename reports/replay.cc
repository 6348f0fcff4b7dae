// The report of `shmstress replay`: how often each invariant a trial violated
// fails again when its exact schedule is re-run. Processes are not
// deterministic, so this is a rate, not a yes/no.
#include <fmt/format.h>

#include <algorithm>

#include "reports/reports.h"

namespace reports {

bool ReplayTally::reproduced() const {
  for (const auto& t : targets) {
    if (auto it = failed.find(t); it != failed.end() && it->second > 0) return true;
  }
  return false;
}

std::vector<std::string> replay_targets(const harness::StoredVerdict& verdict) {
  std::vector<std::string> invalid, unknown;
  for (const auto& c : verdict.checks) {
    if (c.excused) continue;  // an excused verdict counts for nothing
    if (c.verdict == harness::Verdict::kInvalid) invalid.push_back(c.invariant);
    if (c.verdict == harness::Verdict::kUnknown) unknown.push_back(c.invariant);
  }
  return invalid.empty() ? unknown : invalid;
}

void add_replay(ReplayTally* tally, const harness::RunResult& replay) {
  tally->replays += static_cast<int>(replay.tally.trials());
  tally->harness_errors += static_cast<int>(replay.tally.harness_errors());
  for (const auto& [scenario, s] : replay.tally.scenarios()) {
    for (const auto& [inv, cell] : s.invariants) {
      if (cell.invalid > 0) tally->failed[inv] += static_cast<int>(cell.invalid);
      if (cell.unknown > 0) tally->unknown[inv] += static_cast<int>(cell.unknown);
    }
  }
}

std::string replay_text(const ReplayTally& tally) {
  std::string s;
  auto count = [](const std::map<std::string, int>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? 0 : it->second;
  };
  for (const auto& t : tally.targets) {
    s += fmt::format("  {}: {}/{}", t, count(tally.failed, t), tally.replays);
    if (int u = count(tally.unknown, t)) s += fmt::format(" (inconclusive in {})", u);
    s += "\n";
  }
  for (const auto& [inv, n] : tally.failed) {
    if (std::find(tally.targets.begin(), tally.targets.end(), inv) != tally.targets.end()) continue;
    s += fmt::format("  {}: {}/{} (did not fail originally)\n", inv, n, tally.replays);
  }
  if (tally.harness_errors)
    s += fmt::format("  harness errors in {}/{} replays\n", tally.harness_errors, tally.replays);
  return s;
}

std::optional<std::string> command_flag(const std::string& command, const std::string& flag) {
  // Shell words: blanks separate; '...' is literal; \x outside quotes is x;
  // "..." honours \" and \\. Enough for what run.cc's quote() produces.
  std::vector<std::string> words;
  std::string w;
  bool in_word = false;
  for (std::size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(w)), w.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      for (++i; i < command.size() && command[i] != '\''; ++i) w += command[i];
    } else if (c == '"') {
      for (++i; i < command.size() && command[i] != '"'; ++i) {
        if (command[i] == '\\' && i + 1 < command.size() &&
            (command[i + 1] == '"' || command[i + 1] == '\\'))
          ++i;
        w += command[i];
      }
    } else if (c == '\\' && i + 1 < command.size()) {
      w += command[++i];
    } else {
      w += c;
    }
  }
  if (in_word) words.push_back(std::move(w));
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (words[i] == flag && i + 1 < words.size()) return words[i + 1];
    if (words[i].starts_with(flag + "=")) return words[i].substr(flag.size() + 1);
  }
  return std::nullopt;
}

}  // namespace reports
