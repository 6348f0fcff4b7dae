#include "baseline.h"

#include <sstream>

#include "files.h"

namespace harness {

std::expected<Baseline, BaselineError> parse_baseline(std::string_view text,
                                                      const std::string& file, Day today) {
  BaselineError err;
  auto b = decode_baseline(text, file, today, &err);
  if (!b) return std::unexpected(std::move(err));
  return std::move(*b);
}

std::expected<Baseline, BaselineError> load_baseline(const std::string& path, Day today) {
  std::string why;
  auto text = read_regular_file(path, kMaxUserFileBytes, &why);
  if (!text) return std::unexpected(BaselineError{path, 0, "cannot read the baseline: " + why});
  return parse_baseline(*text, path, today);
}

std::string baseline_text(const std::vector<KnownFailure>& entries,
                          const std::vector<std::string>& notes) {
  std::string out =
      "# shmstress baseline: failures this nightly already knows about (docs/ci.md).\n"
      "# A run with --baseline reports their buckets as known; only a new bucket fails it.\n"
      "# One per line: FINGERPRINT  EXPIRES (YYYY-MM-DD, UTC, or never)  REASON\n";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& k = entries[i];
    out += "\n";
    if (i < notes.size() && !notes[i].empty()) {
      std::istringstream is(notes[i]);
      for (std::string l; std::getline(is, l);) out += "# " + l + "\n";
    }
    std::string reason = k.reason;
    for (auto& c : reason) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    out += k.fingerprint + "  " + (k.expires ? day_text(*k.expires) : "never") + "  " + reason +
           "\n";
  }
  return out;
}

}  // namespace harness
