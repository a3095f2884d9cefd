// Every cgroup and /proc file parser, and the names of cgroup directories the container
// runtime and the kubelet create: the first byte picks the parser, the rest is its text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cgroups/hierarchy.h"
#include "cgroups/parsers.h"
#include "cgroups/pods.h"

namespace cgroups = nodewarden::cgroups;

namespace {

// A pod directory name that parses must come back from podCgroupPath as the same name.
void checkPodName(std::string_view name, cgroups::Driver driver, std::string_view qos) {
  auto parsed = cgroups::parsePodCgroupName(name, driver, qos);
  if (!parsed) return;
  if (parsed->uid.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 16) {
    case 0:
      (void)cgroups::parseUint(text);
      break;
    case 1:
      (void)cgroups::parseMax(text);
      break;
    case 2:
      (void)cgroups::parseMemoryStat(text, cgroups::Version::V1);
      break;
    case 3:
      (void)cgroups::parseMemoryStat(text, cgroups::Version::V2);
      break;
    case 4:
      (void)cgroups::parseCpuStatUsageNanos(text);
      break;
    case 5:
      (void)cgroups::parsePressure(text);
      break;
    case 6:
      (void)cgroups::parseMemoryEvents(text);
      break;
    case 7:
      (void)cgroups::parseOomControl(text);
      break;
    case 8:
      (void)cgroups::parseProcs(text);
      break;
    case 9:
      (void)cgroups::parseMemInfo(text);
      break;
    case 10: {
      auto mounts = cgroups::parseMountInfo(text);
      if (mounts) {
        (void)cgroups::hierarchyFromMounts("/sys/fs/cgroup", *mounts, "cpu memory pids");
        (void)cgroups::hierarchyFromMounts("/", *mounts, "");
      }
      (void)cgroups::parseProcCgroup(text);
      break;
    }
    case 11: {
      // memory.stat / cpu.stat / memory.events with a key of the file's own choosing: the
      // first line is the key, the rest the file.
      const std::size_t nl = text.find('\n');
      if (nl == std::string_view::npos) break;
      (void)cgroups::findFlatKey(text.substr(nl + 1), text.substr(0, nl));
      break;
    }
    case 12:
    case 13: {
      const auto driver = data[0] % 16 == 12 ? cgroups::Driver::Cgroupfs : cgroups::Driver::Systemd;
      checkPodName(text, driver, "");
      checkPodName(text, driver, "burstable");
      (void)cgroups::parseQosDirName(text, driver);
      break;
    }
    case 14:
      (void)cgroups::containerIdFromCgroupName(text);
      break;
    default: {
      const auto driver = cgroups::driverForKubepods(text);
      (void)cgroups::podCgroupPath(text, driver, "besteffort",
                                   "0a1b2c3d-0000-4000-8000-000000000001");
      break;
    }
  }
  return 0;
}
