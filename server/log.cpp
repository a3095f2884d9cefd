#include "server/log.h"

#include <algorithm>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <charconv>
#include <chrono>
#include <ctime>
#include <mutex>

namespace nodewarden::server {

namespace {

// Length of the well-formed UTF-8 sequence at the start of `text` (RFC 3629: no overlongs,
// no surrogates, nothing past U+10FFFF), or 0 when it is not one.
std::size_t utf8SequenceLength(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return length;
}

}  // namespace

void appendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      // Bytes from the network (a request target, a body) are not trusted to be UTF-8: a
      // byte that starts no well-formed sequence becomes U+FFFD, so every line and answer
      // stays valid JSON and no raw byte reaches a log.
      const std::size_t length = utf8SequenceLength(text.substr(i));
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    ++i;
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
        if (u < 0x20) {
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

void appendNumber(std::string& out, double value) {
  char buffer[32];
  const auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, 3);
  out.append(buffer, ec == std::errc() ? end : buffer);
}

// Text values are quoted only when they hold spaces, quotes or '=' (logfmt).
void appendTextValue(std::string& out, std::string_view text) {
  // Control bytes and non-ASCII ones go through the JSON escaper too (which also replaces
  // bytes that are not UTF-8), so no raw byte from the network reaches a line.
  const bool quote = text.empty() || text.find_first_of(" \"=\t\n") != std::string_view::npos ||
                     std::any_of(text.begin(), text.end(), [](char c) {
                       const auto u = static_cast<unsigned char>(c);
                       return u < 0x20 || u >= 0x80;
                     });
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

}  // namespace nodewarden::server
