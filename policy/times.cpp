#include "policy/times.h"

#include <array>
#include <charconv>
#include <cstdio>
#include <limits>

namespace nodewarden::policy {
namespace {

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

Error durationError(std::string_view text, std::string_view why) {
  return Error{"\"" + std::string(text) + "\" is not a duration (" + std::string(why) +
               "; expected e.g. 30s, 1m30s, 5m, 1h)"};
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
std::int64_t daysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool readFixed(std::string_view text, std::size_t pos, std::size_t width, int& out) {
  if (pos + width > text.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + width; ++i) {
    if (!isDigit(text[i])) return false;
    out = out * 10 + (text[i] - '0');
  }
  return true;
}

}  // namespace

Result<Duration> parseGoDuration(std::string_view text) {
  std::string_view s = text;
  if (s.empty()) return durationError(text, "empty");
  bool negative = false;
  if (s[0] == '-' || s[0] == '+') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return Duration(0);
  if (s.empty()) return durationError(text, "no number");
  long double total = 0;
  while (!s.empty()) {
    std::size_t i = 0;
    long double value = 0;
    bool sawDigit = false;
    while (i < s.size() && isDigit(s[i])) {
      value = value * 10 + (s[i] - '0');
      sawDigit = true;
      ++i;
    }
    if (i < s.size() && s[i] == '.') {
      ++i;
      long double scale = 0.1L;
      while (i < s.size() && isDigit(s[i])) {
        value += (s[i] - '0') * scale;
        scale /= 10;
        sawDigit = true;
        ++i;
      }
    }
    if (!sawDigit) return durationError(text, "expected a number");
    std::size_t unitStart = i;
    while (i < s.size() && !isDigit(s[i]) && s[i] != '.') ++i;
    std::string_view unit = s.substr(unitStart, i - unitStart);
    long double nanosPerUnit = 0;
    if (unit == "ns") {
      nanosPerUnit = 1;
    } else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") {
      nanosPerUnit = 1e3L;
    } else if (unit == "ms") {
      nanosPerUnit = 1e6L;
    } else if (unit == "s") {
      nanosPerUnit = 1e9L;
    } else if (unit == "m") {
      nanosPerUnit = 60e9L;
    } else if (unit == "h") {
      nanosPerUnit = 3600e9L;
    } else if (unit.empty()) {
      return durationError(text, "missing unit");
    } else {
      return durationError(text, "unknown unit \"" + std::string(unit) + "\"");
    }
    total += value * nanosPerUnit;
    if (total > static_cast<long double>(std::numeric_limits<std::int64_t>::max())) {
      return durationError(text, "too long");
    }
    s.remove_prefix(i);
  }
  auto nanos = static_cast<std::int64_t>(total + 0.5L);
  return Duration(negative ? -nanos : nanos);
}

std::string formatGoDuration(Duration d) {
  std::int64_t n = d.count();
  if (n == 0) return "0s";
  std::string sign = n < 0 ? "-" : "";
  std::uint64_t u = n < 0 ? std::uint64_t(-(n + 1)) + 1 : std::uint64_t(n);
  auto fraction = [](std::uint64_t value, std::uint64_t unit) {
    // "1.5" for value=1500, unit=1000; trailing zeros dropped.
    std::string whole = std::to_string(value / unit);
    std::uint64_t rest = value % unit;
    if (rest == 0) return whole;
    std::string digits = std::to_string(unit + rest).substr(1);
    while (!digits.empty() && digits.back() == '0') digits.pop_back();
    return whole + "." + digits;
  };
  if (u < 1000) return sign + std::to_string(u) + "ns";
  if (u < 1'000'000) return sign + fraction(u, 1000) + "\xC2\xB5s";
  if (u < 1'000'000'000) return sign + fraction(u, 1'000'000) + "ms";
  std::uint64_t hours = u / 3'600'000'000'000ULL;
  u -= hours * 3'600'000'000'000ULL;
  std::uint64_t minutes = u / 60'000'000'000ULL;
  u -= minutes * 60'000'000'000ULL;
  std::string out = sign;
  if (hours > 0) out += std::to_string(hours) + "h";
  if (hours > 0 || minutes > 0) out += std::to_string(minutes) + "m";
  out += fraction(u, 1'000'000'000) + "s";
  return out;
}

Result<WallMicros> parseRfc3339(std::string_view text) {
  auto fail = [&] {
    return Error{"\"" + std::string(text) +
                 "\" is not an RFC 3339 time (expected e.g. 2024-05-01T10:00:00Z)"};
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!readFixed(text, 0, 4, year) || text.size() < 19 || text[4] != '-' ||
      !readFixed(text, 5, 2, month) || text[7] != '-' || !readFixed(text, 8, 2, day) ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || !readFixed(text, 11, 2, hour) ||
      text[13] != ':' || !readFixed(text, 14, 2, minute) || text[16] != ':' ||
      !readFixed(text, 17, 2, second)) {
    return fail();
  }
  static constexpr std::array<int, 12> kDays{31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month < 1 || month > 12 || day < 1 || day > kDays[std::size_t(month - 1)] ||
      (month == 2 && day == 29 && !leap) || hour > 23 || minute > 59 || second > 60) {
    return fail();
  }
  std::size_t pos = 19;
  std::int64_t micros = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    std::int64_t scale = 100000;
    std::size_t digits = 0;
    while (pos < text.size() && isDigit(text[pos])) {
      micros += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
      ++digits;
    }
    if (digits == 0) return fail();
  }
  std::int64_t offsetSeconds = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int oh = 0, om = 0;
    if (!readFixed(text, pos + 1, 2, oh) || pos + 3 >= text.size() || text[pos + 3] != ':' ||
        !readFixed(text, pos + 4, 2, om) || oh > 23 || om > 59) {
      return fail();
    }
    offsetSeconds = (oh * 3600 + om * 60) * (text[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return fail();
  }
  if (pos != text.size()) return fail();
  std::int64_t days = daysFromCivil(year, unsigned(month), unsigned(day));
  std::int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offsetSeconds;
  return WallMicros(seconds * 1'000'000 + micros);
}

}  // namespace nodewarden::policy
