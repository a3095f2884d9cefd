// Quantities: every resource amount of every object goes through this parser. A quantity
// that parses prints canonically, and the printed form parses back to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "policy/quantity.h"
#include "policy/times.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto q = nodewarden::policy::Quantity::parse(text)) {
    (void)q->value();
    (void)q->milliValue();
    const std::string printed = q->toString();
    auto again = nodewarden::policy::Quantity::parse(printed);
    if (!again || !(*again == *q)) std::abort();
    if (again->toString() != printed) std::abort();
  }
  // Kept from the first version of this target (its seeds hold durations and times too);
  // fuzz_times checks them properly.
  (void)nodewarden::policy::parseGoDuration(text);
  (void)nodewarden::policy::parseRfc3339(text);
  return 0;
}
