// Durations (KubeletConfiguration, the policy file) and RFC 3339 times (startTime,
// creationTimestamp, deletionTimestamp of every object). A duration that parses prints as Go
// does, and that text parses back to the same value; a time that parses is stable under
// re-parsing of the same text with a trailing byte removed or not (no reads past the end).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "policy/times.h"

namespace policy = nodewarden::policy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto d = policy::parseGoDuration(text)) {
    const std::string printed = policy::formatGoDuration(*d);
    auto again = policy::parseGoDuration(printed);
    if (!again || *again != *d) std::abort();
    if (policy::formatGoDuration(*again) != printed) std::abort();
  }
  if (auto t = policy::parseRfc3339(text)) {
    // The same text in a buffer of its own size: a parser reading past the view would see
    // different bytes here (and ASan would catch it).
    const std::string copy(text);
    auto again = policy::parseRfc3339(copy);
    if (!again || *again != *t) std::abort();
  }
  return 0;
}
