// Operator logs: one line per event, with named fields, as text or JSON lines (--log-format).
//   text: 2026-11-22T08:15:02.123Z warn evict pod=default/web signal=memory.available ...
//   json:
//   {"time":"2026-11-22T08:15:02.123Z","level":"warn","event":"evict","pod":"default/web",...}
// Lines go to stderr through spdlog (journald and kubectl logs both pick stderr up).
// Thread-safe (spdlog's _mt sink), though the agent logs from its loop thread only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

namespace nodewarden::server {

enum class LogFormat { Text, Json };
enum class LogLevel { Debug, Info, Warn, Error };

// One named value: a string, an integer or a floating-point number.
struct LogField {
  std::string_view key;
  std::variant<std::string, std::int64_t, double, bool> value;
  LogField(std::string_view k, std::string_view v) : key(k), value(std::string(v)) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(std::string(v)) {}
  LogField(std::string_view k, std::int64_t v) : key(k), value(v) {}
  LogField(std::string_view k, std::uint64_t v) : key(k), value(static_cast<std::int64_t>(v)) {}
  LogField(std::string_view k, int v) : key(k), value(static_cast<std::int64_t>(v)) {}
  LogField(std::string_view k, double v) : key(k), value(v) {}
  LogField(std::string_view k, bool v) : key(k), value(v) {}
};

// Appends `text` as a JSON string literal: quotes, backslashes and control characters
// escaped, and any byte that is not part of well-formed UTF-8 replaced by U+FFFD (input from
// the network is not trusted to be UTF-8). The one escaper for log lines and error bodies.
void appendJsonString(std::string& out, std::string_view text);

// Sets the format and minimum level for every later line (default: text, info).
void configureLogging(LogFormat format, LogLevel level = LogLevel::Info);
// Writes one line.
void logEvent(LogLevel level, std::string_view event, std::initializer_list<LogField> fields);
// The line as it would be written, without the time and level (tests).
std::string formatEvent(LogFormat format, std::string_view event,
                        std::initializer_list<LogField> fields);

}  // namespace nodewarden::server
