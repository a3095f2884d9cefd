#include "tests/cgroups/real_env.h"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace nodewarden::test {
namespace {

std::string gSkipReason;
cgroups::Hierarchy gHierarchy;

}  // namespace

const cgroups::Hierarchy& realHierarchy() {
  return gHierarchy;
}

cgroups::Sandbox makeSandbox(cgroups::Driver driver, bool useUnified, bool useFreezer,
                             std::optional<std::uint64_t> memoryLimit) {
  static int counter = 0;
  cgroups::SandboxOptions options;
  options.name = "nodewarden-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
  options.driver = driver;
  options.useUnified = useUnified;
  options.useFreezer = useFreezer;
  options.memoryLimit = memoryLimit;
  auto sandbox = cgroups::Sandbox::create(gHierarchy, options);
  if (!sandbox) FAIL(sandbox.error().message);
  return std::move(sandbox).value();
}

int allocateAndSleep(std::size_t bytes, int lifetimeSeconds) {
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return 2;
  std::memset(memory, 0x5a, bytes);  // touch every page: anonymous, unreclaimable without swap
  for (int i = 0; i < lifetimeSeconds * 10; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return 0;
}

int burnCpu(int lifetimeSeconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(lifetimeSeconds);
  volatile std::uint64_t x = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 100000; ++i) x = x + 1;
  }
  return 0;
}

}  // namespace nodewarden::test

// Decides once, before any test runs, whether this machine can run real-cgroup tests.
extern "C" const char* nodewardenSkipReason() {
  using namespace nodewarden;
  if (::geteuid() != 0) {
    test::gSkipReason = "real-cgroup tests need root (creating cgroups, moving processes)";
    return test::gSkipReason.c_str();
  }
  auto hierarchy = cgroups::discoverHierarchy({});
  if (!hierarchy) {
    test::gSkipReason = "no usable cgroup hierarchy: " + hierarchy.error().message;
    return test::gSkipReason.c_str();
  }
  test::gHierarchy = std::move(hierarchy).value();
  const std::string probe =
      test::gHierarchy.memory + "/nodewarden-test-" + std::to_string(::getpid()) + "-probe";
  if (::mkdir(probe.c_str(), 0755) != 0) {
    test::gSkipReason =
        "cannot create a cgroup in " + test::gHierarchy.memory + ": " + std::strerror(errno);
    return test::gSkipReason.c_str();
  }
  ::rmdir(probe.c_str());
  cgroups::removeStaleSandboxes(test::gHierarchy, "nodewarden-test");
  return nullptr;
}
