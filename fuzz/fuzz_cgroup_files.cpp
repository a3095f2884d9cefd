// Every cgroup and /proc file parser: the first byte picks the file, the rest is its text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cgroups/parsers.h"

namespace cgroups = nodewarden::cgroups;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 11) {
    case 0: (void)cgroups::parseUint(text); break;
    case 1: (void)cgroups::parseMax(text); break;
    case 2: (void)cgroups::parseMemoryStat(text, cgroups::Version::V1); break;
    case 3: (void)cgroups::parseMemoryStat(text, cgroups::Version::V2); break;
    case 4: (void)cgroups::parseCpuStatUsageNanos(text); break;
    case 5: (void)cgroups::parsePressure(text); break;
    case 6: (void)cgroups::parseMemoryEvents(text); break;
    case 7: (void)cgroups::parseOomControl(text); break;
    case 8: (void)cgroups::parseProcs(text); break;
    case 9: (void)cgroups::parseMemInfo(text); break;
    default:
      (void)cgroups::parseMountInfo(text);
      (void)cgroups::parseProcCgroup(text);
  }
  return 0;
}
