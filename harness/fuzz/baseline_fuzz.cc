// libFuzzer target over a baseline as `run --baseline`, `merge --baseline`
// and `baseline` decode it (harness::decode_baseline, known.h): either format,
// a file a user edits by hand or a run's summary.json. It is bytes someone
// else wrote, so it must decode to a Baseline or to an error naming file:line:
// never an exception, a crash or a sanitizer report.
//
// The input is the file, byte for byte. Beyond "does not crash", what the
// callers rely on is checked: every entry has a fingerprint triage can match,
// a reason (`baseline` writes it into a line that must have one), a line in
// the file, and is filed once, as known or as expired by today.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "known.h"
#include "triage.h"
#include "check.h"

namespace {

constexpr char kFile[] = "known-failures.txt";

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n\v\f") == std::string::npos; }

void check_entry(const harness::KnownFailure& k, harness::Day today, bool expired) {
  check(harness::parse_fingerprint(k.fingerprint).has_value(), "an entry's fingerprint is one triage makes");
  check(!blank(k.reason), "an entry has a reason");
  check(k.line >= 1, "an entry names its line");
  check(expired == (k.expires && *k.expires < today), "an entry is expired exactly when its day is past");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const harness::Day today = *harness::parse_day("2026-06-15");
  harness::BaselineError err;
  auto b = harness::decode_baseline(text, kFile, today, &err);
  if (!b) {
    check(err.file == kFile, "an error names the file");
    check(!err.message.empty(), "an error says what is wrong");
    check(err.line >= 0, "an error's line is a line");
    check(err.to_string().starts_with(kFile), "an error reads file:line: message");
    return 0;
  }
  check(b->file == kFile, "the baseline knows its file");
  for (const auto& [fp, k] : b->known) {
    check(fp == k.fingerprint, "a known entry is filed under its fingerprint");
    check_entry(k, today, false);
    check(b->find(fp) == &k, "a known entry is found by its fingerprint");
  }
  for (const auto& k : b->expired) {
    check_entry(k, today, true);
    check(b->find(k.fingerprint) == nullptr, "an expired entry is not known");
  }
  return 0;
}
