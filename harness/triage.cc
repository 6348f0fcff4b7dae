#include "triage.h"

#include <cctype>
#include <cstdint>
#include <cstdio>

namespace harness {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
// Where a path ends: whitespace, list punctuation, brackets and quotes.
bool ends_path(char c) {
  return is_space(c) || c == ',' || c == ';' || c == '(' || c == ')' || c == '[' || c == ']' ||
         c == '{' || c == '}' || c == '"' || c == '\'' || c == '`';
}
// What may stand before a path: a path starts a token.
bool starts_token(char prev) {
  return is_space(prev) || prev == '(' || prev == '[' || prev == '{' || prev == '"' ||
         prev == '\'' || prev == '`' || prev == '=' || prev == ':' || prev == ',';
}

bool is_time_unit(std::string_view u) {
  return u == "ns" || u == "us" || u == "ms" || u == "s" || u == "m" || u == "h" || u == "min" ||
         u == "sec" || u == "secs" || u == "seconds";
}

bool is_hexish(std::string_view w) {
  std::string_view s = w;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// One word that contains a digit: a number, a time, a hex string, or a word
// whose digits are incidental ("t3", "rank1").
std::string word_shape(std::string_view w) {
  // [+-]digits[.digits][unit]
  std::size_t i = 0;
  while (i < w.size() && is_digit(w[i])) ++i;
  if (i > 0) {
    std::size_t j = i;
    if (j + 1 < w.size() && w[j] == '.' && is_digit(w[j + 1])) {
      for (++j; j < w.size() && is_digit(w[j]); ++j) {
      }
    }
    std::string_view unit = w.substr(j);
    if (unit.empty()) return "<n>";
    if (is_time_unit(unit)) return "<t>";
    if (unit == "%") return "<n>%";
  }
  if (is_hexish(w)) return "<n>";
  std::string out;
  for (std::size_t k = 0; k < w.size(); ++k) {
    if (is_digit(w[k])) {
      if (out.empty() || out.back() != '#') out += '#';
    } else {
      out += w[k];
    }
  }
  return out;
}

// Token pass: paths, numbers, times, words with digits.
std::string tokens(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const char prev = i == 0 ? ' ' : s[i - 1];
    if (is_space(c)) {
      if (!out.empty() && out.back() != ' ') out += ' ';
      ++i;
      continue;
    }
    // A path (or an shm name): '/' starting a token, followed by a name character.
    if (c == '/' && starts_token(prev) && i + 1 < s.size() && !ends_path(s[i + 1]) &&
        s[i + 1] != '/') {
      std::size_t j = i + 1;
      while (j < s.size() && !ends_path(s[j])) ++j;
      // Sentence punctuation after a path is not part of it.
      while (j > i + 1 && (s[j - 1] == '.' || s[j - 1] == ':')) --j;
      out += "<path>";
      i = j;
      continue;
    }
    // A word: letters, digits, '_', and a '.' between digits (a decimal).
    if (is_word(c) || ((c == '+' || c == '-') && i + 1 < s.size() && is_digit(s[i + 1]) &&
                       !is_word(prev))) {
      std::size_t j = i + 1;
      bool digit = is_digit(c);
      while (j < s.size()) {
        if (is_word(s[j])) {
          digit |= is_digit(s[j]);
          ++j;
        } else if (s[j] == '.' && j + 1 < s.size() && is_digit(s[j + 1]) && is_digit(s[j - 1])) {
          ++j;
        } else if (s[j] == '%' && is_digit(s[j - 1])) {
          ++j;
          break;
        } else {
          break;
        }
      }
      std::string_view w = s.substr(i, j - i);
      if (!digit) {
        out.append(w);
      } else {
        if (w[0] == '+' || w[0] == '-') w.remove_prefix(1);  // a relative time: its sign goes too
        out += word_shape(w);
      }
      i = j;
      continue;
    }
    out += c;
    ++i;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// "<x>, <x> and <x>" -> "<x>"; "<x>,<x>" -> "<x>"; "<x> <x>" -> "<x>".
std::string collapse_placeholders(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '<') {
      std::size_t close = s.find('>', i);
      if (close != std::string::npos) {
        const std::string ph = s.substr(i, close - i + 1);
        out += ph;
        i = close + 1;
        for (;;) {  // swallow "<sep> ph" as long as it repeats
          std::size_t j = i;
          if (s.compare(j, 5, " and ") == 0) {
            j += 5;
          } else if (s.compare(j, 4, " or ") == 0) {
            j += 4;
          } else {
            while (j < s.size() && (s[j] == ',' || s[j] == ' ' || s[j] == ';' || s[j] == '/')) ++j;
          }
          if (j > i && s.compare(j, ph.size(), ph) == 0) {
            i = j + ph.size();
          } else {
            break;
          }
        }
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

// A clause repeated in a list ("rank <n> (pid <n>) got prefix <n> at <t>, rank
// <n> ...") is kept once. Separators: ", " and "; " at bracket depth 0.
std::string collapse_clauses(const std::string& s) {
  std::vector<std::string> parts;
  std::vector<std::string> seps;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    if (depth == 0 && (c == ',' || c == ';') && i + 1 < s.size() && s[i + 1] == ' ') {
      parts.push_back(s.substr(start, i - start));
      seps.push_back(s.substr(i, 2));
      start = i + 2;
      ++i;
    }
  }
  parts.push_back(s.substr(start));
  std::string out = parts[0];
  for (std::size_t k = 1; k < parts.size(); ++k) {
    if (parts[k] == parts[k - 1]) continue;
    out += seps[k - 1] + parts[k];
  }
  return out;
}

std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 14695981039346656037ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

}  // namespace

std::string problem_shape(std::string_view problem) {
  std::string s = collapse_clauses(collapse_placeholders(tokens(problem)));
  if (s.size() > kMaxShapeLength) {
    // Cut at a character boundary (never inside a UTF-8 sequence).
    std::size_t n = kMaxShapeLength;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    s.resize(n);
  }
  return s;
}

Fingerprint make_fingerprint(std::string_view invariant, std::string_view scenario,
                             std::string_view shape) {
  std::uint64_t h = fnv1a(invariant);
  h = fnv1a(std::string_view("\0", 1), h);
  h = fnv1a(scenario, h);
  h = fnv1a(std::string_view("\0", 1), h);
  h = fnv1a(shape, h);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  Fingerprint f;
  f.id = std::string(invariant) + "/" + std::string(scenario) + "/" + std::string(hex, 12);
  f.shape = std::string(shape);
  return f;
}

std::optional<FingerprintParts> parse_fingerprint(std::string_view id) {
  const auto a = id.find('/');
  const auto b = id.rfind('/');
  if (a == std::string_view::npos || a == b) return std::nullopt;
  FingerprintParts p{std::string(id.substr(0, a)), std::string(id.substr(a + 1, b - a - 1)),
                     std::string(id.substr(b + 1))};
  if (p.invariant.empty() || p.scenario.empty() || p.hash.size() != 12) return std::nullopt;
  for (char c : p.invariant + p.scenario) {
    if (!name_char(c)) return std::nullopt;
  }
  for (char c : p.hash) {
    if (!(is_digit(c) || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  return p;
}

std::vector<Fingerprint> violation_fingerprints(std::string_view scenario, const CheckResult& c) {
  std::vector<Fingerprint> out;
  auto add = [&](const std::string& shape) {
    for (const auto& f : out) {
      if (f.shape == shape) return;
    }
    out.push_back(make_fingerprint(c.invariant, scenario, shape));
  };
  for (const auto& p : c.problems) {
    if (out.size() >= kMaxShapesPerViolation) break;
    add(problem_shape(p));
  }
  if (out.empty()) add("(no problem text)");
  return out;
}

}  // namespace harness
