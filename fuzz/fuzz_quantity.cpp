// Quantities, durations and times: the smallest parsers every input goes through.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "policy/quantity.h"
#include "policy/times.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto q = nodewarden::policy::Quantity::parse(text)) {
    (void)q->value();
    (void)q->toString();
  }
  (void)nodewarden::policy::parseGoDuration(text);
  (void)nodewarden::policy::parseRfc3339(text);
  return 0;
}
