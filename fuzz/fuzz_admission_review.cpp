// The pods/binding AdmissionReview the webhook and the agent take from the network.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "webhook/review.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)nodewarden::webhook::parseBindingReview(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
