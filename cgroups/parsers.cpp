#include "cgroups/parsers.h"

#include <algorithm>
#include <charconv>

namespace nodewarden::cgroups {
namespace {

constexpr std::uint64_t kUnlimitedAbove = std::uint64_t{1} << 62;

// Shows at most 40 bytes of offending text, printable ASCII only.
std::string quote(std::string_view text) {
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < 40; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      out += '?';
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > 40) out += "...";
  return out + "\"";
}

std::string_view trimNewline(std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text;
}

bool isSpace(char c) {
  return c == ' ' || c == '\t';
}

// Splits off the next whitespace-separated token.
std::string_view nextToken(std::string_view& rest) {
  std::size_t i = 0;
  while (i < rest.size() && isSpace(rest[i])) ++i;
  std::size_t j = i;
  while (j < rest.size() && !isSpace(rest[j])) ++j;
  std::string_view token = rest.substr(i, j - i);
  rest.remove_prefix(j);
  return token;
}

// Splits off the next line (without its '\n').
std::string_view nextLine(std::string_view& rest) {
  const std::size_t end = rest.find('\n');
  std::string_view line = rest.substr(0, end);
  rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
  return line;
}

template <typename Int>
bool toInt(std::string_view token, Int& out) {
  if (token.empty()) return false;
  const char* end = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), end, out);
  return ec == std::errc() && ptr == end;
}

Error badNumber(std::string_view what, std::string_view token) {
  return Error{std::string(what) + ": expected an unsigned decimal number, got " + quote(token)};
}

}  // namespace

Result<std::uint64_t> parseUint(std::string_view text) {
  const std::string_view body = trimNewline(text);
  std::uint64_t value = 0;
  if (!toInt(body, value)) return badNumber("value", body);
  return value;
}

Result<std::optional<std::uint64_t>> parseMax(std::string_view text) {
  const std::string_view body = trimNewline(text);
  if (body == "max") return std::optional<std::uint64_t>{};
  std::uint64_t value = 0;
  if (!toInt(body, value)) {
    return Error{"limit: expected \"max\" or an unsigned decimal number, got " + quote(body)};
  }
  if (value > kUnlimitedAbove) return std::optional<std::uint64_t>{};
  return std::optional<std::uint64_t>{value};
}

namespace {

// Where a line is, for messages: "<what>line N".
struct Where {
  std::string_view what;
  int line = 0;
  std::string text() const { return std::string(what) + "line " + std::to_string(line); }
};

// Walks a flat keyed file, checking every line ("KEY VALUE" with an unsigned VALUE) and
// calling `each(name, value, where)`, where `where.text()` is "<what>line N" for messages.
// `each` returns an Error to stop. Messages start with `what` ("" or "memory.stat ").
template <typename F>
std::optional<Error> forEachFlatEntry(std::string_view text, std::string_view what, F&& each) {
  std::string_view rest = text;
  int lineNumber = 0;
  while (!rest.empty()) {
    std::string_view line = nextLine(rest);
    ++lineNumber;
    if (line.empty()) continue;
    // Made only for a message: a memory.stat of 40 lines is read for every pod.
    const Where where{what, lineNumber};
    // The kernel's own shape, "KEY VALUE" with one space and no tab, split by memchr; any other
    // line goes the token by token way below, which accepts and refuses the same lines.
    if (const std::size_t space = line.find(' '); space != 0 && space != std::string_view::npos &&
                                                  line.find('\t') == std::string_view::npos) {
      std::uint64_t value = 0;
      if (toInt(line.substr(space + 1), value)) {
        if (auto error = each(line.substr(0, space), value, where)) return error;
        continue;
      }
    }
    std::string_view tokens = line;
    const std::string_view name = nextToken(tokens);
    const std::string_view number = nextToken(tokens);
    if (name.empty() || number.empty() || !nextToken(tokens).empty()) {
      return Error{where.text() + ": expected \"KEY VALUE\", got " + quote(line)};
    }
    std::uint64_t value = 0;
    if (!toInt(number, value)) {
      return badNumber(where.text() + " (" + std::string(name) + ")", number);
    }
    if (auto error = each(name, value, where)) return error;
  }
  return std::nullopt;
}

// Stores `value` in `slot`; the kernel prints each key once, so a repeat means the text is
// not one file's content.
std::optional<Error> storeOnce(std::optional<std::uint64_t>& slot, std::uint64_t value,
                               std::string_view name, const Where& where) {
  if (slot) return Error{where.text() + ": duplicate key " + quote(name)};
  slot = value;
  return std::nullopt;
}

}  // namespace

Result<std::optional<std::uint64_t>> findFlatKey(std::string_view text, std::string_view key) {
  std::optional<std::uint64_t> found;
  auto error = forEachFlatEntry(
      text, "",
      [&](std::string_view name, std::uint64_t value, const Where& where) -> std::optional<Error> {
        if (name != key) return std::nullopt;
        return storeOnce(found, value, name, where);
      });
  if (error) return *error;
  return found;
}

Result<MemoryStat> parseMemoryStat(std::string_view text, Version version) {
  MemoryStat stat;
  const bool v1 = version == Version::V1;
  // One pass over the lines; v1 falls back to the local "inactive_file" when the
  // hierarchical total is missing (use_hierarchy off on old kernels).
  std::optional<std::uint64_t> inactive;
  std::optional<std::uint64_t> totalInactive;
  auto error = forEachFlatEntry(
      text, "memory.stat ",
      [&](std::string_view name, std::uint64_t value, const Where& where) -> std::optional<Error> {
        std::optional<std::uint64_t>* target = nullptr;
        if (name == "inactive_file") {
          target = &inactive;
        } else if (v1 && name == "total_inactive_file") {
          target = &totalInactive;
        } else if (name == (v1 ? "total_rss" : "anon")) {
          target = &stat.anon;
        } else if (name == (v1 ? "total_cache" : "file")) {
          target = &stat.file;
        }
        if (target == nullptr) return std::nullopt;
        return storeOnce(*target, value, name, where);
      });
  if (error) return *error;
  if (totalInactive) {
    stat.inactiveFile = *totalInactive;
  } else if (inactive) {
    stat.inactiveFile = *inactive;
  } else {
    return Error{std::string("memory.stat: no ") +
                 (v1 ? "total_inactive_file or inactive_file" : "inactive_file") + " line"};
  }
  return stat;
}

std::uint64_t workingSet(std::uint64_t usage, std::uint64_t inactiveFile) {
  return usage < inactiveFile ? 0 : usage - inactiveFile;
}

Result<std::uint64_t> parseCpuStatUsageNanos(std::string_view text) {
  auto usec = findFlatKey(text, "usage_usec");
  if (!usec) return usec.error().withContext("cpu.stat");
  if (!usec.value()) return Error{"cpu.stat: no usage_usec line"};
  const std::uint64_t micros = **usec;
  if (micros > UINT64_MAX / 1000) return Error{"cpu.stat: usage_usec too large"};
  return micros * 1000;
}

namespace {

// Parses "avg10=0.00 avg60=0.00 avg300=0.00 total=0" in any order; all four required.
Result<PressureLine> parsePressureFields(std::string_view rest, std::string_view kind) {
  PressureLine line;
  unsigned seen = 0;
  for (std::string_view field = nextToken(rest); !field.empty(); field = nextToken(rest)) {
    const std::size_t eq = field.find('=');
    if (eq == std::string_view::npos) {
      return Error{std::string(kind) + ": expected KEY=VALUE, got " + quote(field)};
    }
    const std::string_view name = field.substr(0, eq);
    const std::string_view number = field.substr(eq + 1);
    if (name == "total") {
      if (seen & 8) return Error{std::string(kind) + ": duplicate total"};
      if (!toInt(number, line.totalMicros)) return badNumber(std::string(kind) + " total", number);
      seen |= 8;
      continue;
    }
    double* target = name == "avg10"    ? &line.avg10
                     : name == "avg60"  ? &line.avg60
                     : name == "avg300" ? &line.avg300
                                        : nullptr;
    if (target == nullptr) continue;  // a future field
    const unsigned bit = name == "avg10" ? 1 : name == "avg60" ? 2 : 4;
    if (seen & bit) return Error{std::string(kind) + ": duplicate " + std::string(name)};
    const char* end = number.data() + number.size();
    const auto [ptr, ec] = std::from_chars(number.data(), end, *target);
    // Written so that NaN (which from_chars accepts as "nan") fails the range check too.
    if (number.empty() || ec != std::errc() || ptr != end || !(*target >= 0 && *target <= 100)) {
      return Error{std::string(kind) + " " + std::string(name) + ": expected a percentage, got " +
                   quote(number)};
    }
    seen |= bit;
  }
  if (seen != 15) {
    return Error{std::string(kind) + ": expected avg10, avg60, avg300 and total"};
  }
  return line;
}

}  // namespace

Result<Pressure> parsePressure(std::string_view text) {
  Pressure pressure;
  bool haveSome = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    std::string_view line = nextLine(rest);
    if (line.empty()) continue;
    std::string_view fields = line;
    const std::string_view kind = nextToken(fields);
    if (kind != "some" && kind != "full") {
      return Error{"pressure: expected a \"some\" or \"full\" line, got " + quote(line)};
    }
    if (kind == "some" ? haveSome : pressure.full.has_value()) {
      return Error{"pressure: duplicate \"" + std::string(kind) + "\" line"};
    }
    auto parsed = parsePressureFields(fields, kind);
    if (!parsed) return parsed.error().withContext("pressure");
    if (kind == "some") {
      pressure.some = *parsed;
      haveSome = true;
    } else {
      pressure.full = *parsed;
    }
  }
  if (!haveSome) return Error{"pressure: no \"some\" line"};
  return pressure;
}

Result<MemoryEvents> parseMemoryEvents(std::string_view text) {
  MemoryEvents events;
  struct Key {
    std::string_view name;
    std::uint64_t MemoryEvents::*field;
  };
  static constexpr Key kKeys[] = {
      {"low", &MemoryEvents::low},          {"high", &MemoryEvents::high},
      {"max", &MemoryEvents::max},          {"oom", &MemoryEvents::oom},
      {"oom_kill", &MemoryEvents::oomKill}, {"oom_group_kill", &MemoryEvents::oomGroupKill},
  };
  bool any = false;
  for (const Key& key : kKeys) {
    auto value = findFlatKey(text, key.name);
    if (!value) return value.error().withContext("memory.events");
    if (*value) {
      events.*key.field = **value;
      any = true;
    }
  }
  if (!any) return Error{"memory.events: none of low, high, max, oom, oom_kill"};
  return events;
}

Result<OomControl> parseOomControl(std::string_view text) {
  OomControl control;
  auto disable = findFlatKey(text, "oom_kill_disable");
  if (!disable) return disable.error().withContext("memory.oom_control");
  auto under = findFlatKey(text, "under_oom");
  if (!under) return under.error().withContext("memory.oom_control");
  if (!*disable || !*under) {
    return Error{"memory.oom_control: expected oom_kill_disable and under_oom"};
  }
  auto kills = findFlatKey(text, "oom_kill");
  if (!kills) return kills.error().withContext("memory.oom_control");
  control.oomKillDisable = **disable != 0;
  control.underOom = **under != 0;
  control.oomKill = *kills;
  return control;
}

Result<std::vector<pid_t>> parseProcs(std::string_view text) {
  std::vector<pid_t> pids;
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::string_view line = nextLine(rest);
    if (line.empty()) continue;
    pid_t pid = 0;
    if (!toInt(line, pid) || pid <= 0)
      return Error{"cgroup.procs: expected a PID, got " + quote(line)};
    pids.push_back(pid);
  }
  return pids;
}

Result<MemInfo> parseMemInfo(std::string_view text) {
  MemInfo info;
  bool haveTotal = false;
  bool haveSwap = false;
  bool haveFree = false;
  bool haveInactive = false;
  bool haveAvailable = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    std::string_view line = nextLine(rest);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    std::uint64_t* target = nullptr;
    bool* have = nullptr;
    if (name == "MemTotal") {
      target = &info.memTotal;
      have = &haveTotal;
    } else if (name == "MemFree") {
      target = &info.memFree;
      have = &haveFree;
    } else if (name == "Inactive(file)") {
      target = &info.inactiveFile;
      have = &haveInactive;
    } else if (name == "SwapTotal") {
      target = &info.swapTotal;
      have = &haveSwap;
    } else if (name == "MemAvailable") {
      info.memAvailable = 0;
      target = &*info.memAvailable;
      have = &haveAvailable;
    } else {
      continue;
    }
    if (*have) return Error{"meminfo: duplicate " + std::string(name)};
    *have = true;
    std::string_view fields = line.substr(colon + 1);
    const std::string_view number = nextToken(fields);
    const std::string_view unit = nextToken(fields);
    if (!nextToken(fields).empty()) {
      return Error{"meminfo " + std::string(name) + ": expected \"VALUE kB\", got " + quote(line)};
    }
    std::uint64_t value = 0;
    if (!toInt(number, value)) return badNumber("meminfo " + std::string(name), number);
    if (unit == "kB") {
      if (value > UINT64_MAX / 1024) return Error{"meminfo " + std::string(name) + ": too large"};
      value *= 1024;
    } else if (!unit.empty()) {
      return Error{"meminfo " + std::string(name) + ": unknown unit " + quote(unit)};
    }
    *target = value;
  }
  if (!haveTotal || !haveFree) return Error{"meminfo: expected MemTotal and MemFree"};
  return info;
}

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescapeOctal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      const std::string_view digits = text.substr(i + 1, 3);
      // from_chars would take a sign ("\-12"); the kernel writes exactly three octal digits.
      const bool octal =
          std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '7'; });
      int value = 0;
      const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + 3, value, 8);
      if (octal && ec == std::errc() && ptr == digits.data() + 3 && value < 256) {
        out += static_cast<char>(value);
        i += 3;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

std::vector<std::string> splitList(std::string_view text, char separator) {
  std::vector<std::string> parts;
  while (!text.empty()) {
    const std::size_t end = text.find(separator);
    const std::string_view part = text.substr(0, end);
    if (!part.empty()) parts.emplace_back(part);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  return parts;
}

}  // namespace

Result<std::vector<CgroupMount>> parseMountInfo(std::string_view text) {
  // 35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:1 - cgroup cgroup rw,memory
  std::vector<CgroupMount> mounts;
  std::string_view rest = text;
  int lineNumber = 0;
  while (!rest.empty()) {
    std::string_view line = nextLine(rest);
    ++lineNumber;
    if (line.empty()) continue;
    const std::size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) {
      return Error{"mountinfo line " + std::to_string(lineNumber) + ": no \" - \" separator"};
    }
    std::string_view tail = line.substr(dash + 3);
    const std::string_view fsType = nextToken(tail);
    if (fsType != "cgroup" && fsType != "cgroup2") continue;
    const std::string_view source = nextToken(tail);
    const std::string_view superOptions = nextToken(tail);
    std::string_view head = line.substr(0, dash);
    nextToken(head);  // mount ID
    nextToken(head);  // parent ID
    nextToken(head);  // major:minor
    const std::string_view root = nextToken(head);
    const std::string_view mountPoint = nextToken(head);
    // The kernel always prints super options (at least "rw" or "ro"): none means the line
    // was cut short.
    if (source.empty() || superOptions.empty() || root.empty() || mountPoint.empty()) {
      return Error{"mountinfo line " + std::to_string(lineNumber) + ": expected 10 fields, got " +
                   quote(line)};
    }
    CgroupMount mount;
    mount.mountPoint = unescapeOctal(mountPoint);
    mount.root = unescapeOctal(root);
    mount.version = fsType == "cgroup2" ? Version::V2 : Version::V1;
    if (mount.version == Version::V1) {
      static constexpr std::string_view kNotControllers[] = {
          "rw",       "ro",    "relatime",       "noatime",
          "nosuid",   "nodev", "noexec",         "clone_children",
          "noprefix", "xattr", "cpuset_v2_mode", "favordynmods"};
      for (std::string& option : splitList(superOptions, ',')) {
        bool skip = option.starts_with("release_agent=");
        for (std::string_view other : kNotControllers) skip = skip || option == other;
        if (!skip) mount.controllers.push_back(std::move(option));
      }
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

Result<std::vector<ProcCgroup>> parseProcCgroup(std::string_view text) {
  std::vector<ProcCgroup> entries;
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::string_view line = nextLine(rest);
    if (line.empty()) continue;
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    ProcCgroup entry;
    // The kernel prints a non-negative ID and an absolute path (with "/.." steps outside the
    // reader's cgroup namespace); anything else is not this file or was cut short.
    if (second == std::string_view::npos || !toInt(line.substr(0, first), entry.hierarchyId) ||
        entry.hierarchyId < 0 || !line.substr(second + 1).starts_with('/')) {
      return Error{"/proc/PID/cgroup: expected ID:CONTROLLERS:PATH, got " + quote(line)};
    }
    entry.controllers = splitList(line.substr(first + 1, second - first - 1), ',');
    entry.path = std::string(line.substr(second + 1));
    entries.push_back(std::move(entry));
  }
  return entries;
}

Result<std::string> formatPsiTrigger(PressureKind kind, std::uint64_t stallMicros,
                                     std::uint64_t windowMicros, bool privileged) {
  constexpr std::uint64_t kMinWindow = 500'000;
  constexpr std::uint64_t kMaxWindow = 10'000'000;
  if (windowMicros < kMinWindow || windowMicros > kMaxWindow) {
    return Error{"PSI trigger: the window must be between 500ms and 10s, got " +
                 std::to_string(windowMicros) + "us"};
  }
  if (stallMicros == 0 || stallMicros > windowMicros) {
    return Error{"PSI trigger: the stall must be above 0 and at most the window, got " +
                 std::to_string(stallMicros) + "us"};
  }
  if (!privileged && windowMicros % 2'000'000 != 0) {
    return Error{"PSI trigger: without CAP_SYS_RESOURCE the window must be a multiple of 2s"};
  }
  return std::string(kind == PressureKind::Some ? "some " : "full ") + std::to_string(stallMicros) +
         " " + std::to_string(windowMicros);
}

}  // namespace nodewarden::cgroups
