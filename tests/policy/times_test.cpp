#include <doctest/doctest.h>

#include "policy/times.h"

using namespace std::chrono_literals;
using nodewarden::policy::formatGoDuration;
using nodewarden::policy::parseGoDuration;
using nodewarden::policy::parseRfc3339;

TEST_CASE("go durations parse as KubeletConfiguration writes them") {
  CHECK(parseGoDuration("30s").value() == 30s);
  CHECK(parseGoDuration("1m30s").value() == 90s);
  CHECK(parseGoDuration("5m").value() == 5min);
  CHECK(parseGoDuration("1.5h").value() == 90min);
  CHECK(parseGoDuration("300ms").value() == 300ms);
  CHECK(parseGoDuration("1h2m3s4ms5us6ns").value() == 1h + 2min + 3s + 4ms + 5us + 6ns);
  CHECK(parseGoDuration("0").value() == 0s);
  CHECK(parseGoDuration("-30s").value() == -30s);
  CHECK(parseGoDuration("1\xC2\xB5s").value() == 1us);
  for (const char* bad : {"", "30", "s", "1x", "1.s5", "--1s", "1 s", "abc"}) {
    CAPTURE(bad);
    auto r = parseGoDuration(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("is not a duration") != std::string::npos);
  }
}

TEST_CASE("go durations print as time.Duration.String()") {
  CHECK(formatGoDuration(0s) == "0s");
  CHECK(formatGoDuration(30s) == "30s");
  CHECK(formatGoDuration(5min) == "5m0s");
  CHECK(formatGoDuration(90min) == "1h30m0s");
  CHECK(formatGoDuration(1500ms) == "1.5s");
  CHECK(formatGoDuration(300ms) == "300ms");
  CHECK(formatGoDuration(-30s) == "-30s");
}

TEST_CASE("RFC 3339 timestamps") {
  CHECK(parseRfc3339("1970-01-01T00:00:00Z").value() == 0);
  CHECK(parseRfc3339("2024-05-01T10:00:00Z").value() == 1714557600LL * 1'000'000);
  CHECK(parseRfc3339("2024-05-01T12:00:00+02:00").value() == 1714557600LL * 1'000'000);
  CHECK(parseRfc3339("2024-05-01T10:00:00.5Z").value() == 1714557600LL * 1'000'000 + 500'000);
  CHECK(parseRfc3339("2024-02-29T00:00:00Z").ok());
  CHECK(parseRfc3339("2000-02-29T00:00:00Z").ok());
  CHECK_FALSE(parseRfc3339("2023-02-29T00:00:00Z").ok());
  CHECK_FALSE(parseRfc3339("1900-02-29T00:00:00Z").ok());
  for (const char* bad : {"", "2024-05-01", "2024-13-01T00:00:00Z", "2024-05-01T10:00:00",
                          "yesterday", "2024-05-01T10:00:00Zjunk"}) {
    CAPTURE(bad);
    CHECK_FALSE(parseRfc3339(bad).ok());
  }
}
