// The policy file: parse, and when valid, print it back and resolve every threshold.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "policy/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nodewarden::policy::Diagnostics diagnostics;
  auto policy = nodewarden::policy::parsePolicyText(
      std::string_view(reinterpret_cast<const char*>(data), size), diagnostics);
  if (policy) {
    (void)nodewarden::policy::policyToJson(*policy).dump();
    for (const auto& t : policy->thresholds) {
      (void)t.value.resolve(std::int64_t(1) << 40);
      (void)t.minReclaim.resolve(std::int64_t(1) << 40);
    }
  }
  return 0;
}
