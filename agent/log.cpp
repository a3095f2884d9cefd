#include "agent/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <charconv>
#include <chrono>
#include <ctime>
#include <mutex>

namespace nodewarden::agent {
namespace {

LogFormat gFormat = LogFormat::Text;
LogLevel gLevel = LogLevel::Info;

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto created = std::make_shared<spdlog::logger>(
        "nodewarden", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    created->set_pattern("%v");  // time and level are part of the composed line
    created->set_level(spdlog::level::trace);
    created->flush_on(spdlog::level::trace);
    return created;
  }();
  return *instance;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Debug:
      return "debug";
    case LogLevel::Info:
      return "info";
    case LogLevel::Warn:
      return "warn";
    case LogLevel::Error:
      return "error";
  }
  return "info";
}

void appendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void appendNumber(std::string& out, double value) {
  char buffer[32];
  const auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, 3);
  out.append(buffer, ec == std::errc() ? end : buffer);
}

// Text values are quoted only when they hold spaces, quotes or '=' (logfmt).
void appendTextValue(std::string& out, std::string_view text) {
  const bool quote = text.empty() || text.find_first_of(" \"=\t\n") != std::string_view::npos;
  if (quote) {
    appendJsonString(out, text);
  } else {
    out += text;
  }
}

std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return buffer;
}

// Appends one field value: strings quoted as JSON (or logfmt-quoted only when needed).
void appendValue(std::string& out, const LogField& field, LogFormat format) {
  std::visit(
      [&](const auto& value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (format == LogFormat::Json) {
            appendJsonString(out, value);
          } else {
            appendTextValue(out, value);
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          out += value ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          appendNumber(out, value);
        } else {
          out += std::to_string(value);
        }
      },
      field.value);
}

std::string compose(LogFormat format, const char* level, std::string_view event,
                    std::initializer_list<LogField> fields, bool withPrefix) {
  std::string line;
  if (format == LogFormat::Json) {
    line += '{';
    if (withPrefix) line += "\"time\":\"" + timestamp() + "\",\"level\":\"" + level + "\",";
    line += "\"event\":";
    appendJsonString(line, event);
    for (const LogField& field : fields) {
      line += ',';
      appendJsonString(line, field.key);
      line += ':';
      appendValue(line, field, format);
    }
    line += '}';
    return line;
  }
  if (withPrefix) line += timestamp() + " " + level + " ";
  line += event;
  for (const LogField& field : fields) {
    line += ' ';
    line += field.key;
    line += '=';
    appendValue(line, field, format);
  }
  return line;
}

}  // namespace

void configureLogging(LogFormat format, LogLevel level) {
  gFormat = format;
  gLevel = level;
}

void logEvent(LogLevel level, std::string_view event, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < static_cast<int>(gLevel)) return;
  const std::string line = compose(gFormat, levelName(level), event, fields, true);
  logger().log(spdlog::level::info, spdlog::string_view_t(line.data(), line.size()));
}

std::string formatEvent(LogFormat format, std::string_view event,
                        std::initializer_list<LogField> fields) {
  return compose(format, "", event, fields, false);
}

}  // namespace nodewarden::agent
