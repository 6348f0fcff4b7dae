#include "known.h"

#include <chrono>
#include <cstdio>
#include <string>

namespace harness {

std::optional<Day> parse_day(std::string_view t) {
  if (t.size() != 10 || t[4] != '-' || t[7] != '-') return std::nullopt;
  int y = 0, m = 0, d = 0;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (t[i] < '0' || t[i] > '9') return std::nullopt;
  }
  y = std::stoi(std::string(t.substr(0, 4)));
  m = std::stoi(std::string(t.substr(5, 2)));
  d = std::stoi(std::string(t.substr(8, 2)));
  const std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(static_cast<unsigned>(m)),
                                        std::chrono::day(static_cast<unsigned>(d))};
  if (!ymd.ok()) return std::nullopt;
  return Day{static_cast<int>(std::chrono::sys_days(ymd).time_since_epoch().count())};
}

std::string day_text(Day d) {
  const std::chrono::year_month_day ymd{std::chrono::sys_days(std::chrono::days(d.days))};
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
  return buf;
}

Day today_utc() {
  const auto now = std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now());
  return Day{static_cast<int>(now.time_since_epoch().count())};
}

const KnownFailure* Baseline::find(std::string_view fingerprint) const {
  auto it = known.find(std::string(fingerprint));
  return it == known.end() ? nullptr : &it->second;
}

}  // namespace harness
