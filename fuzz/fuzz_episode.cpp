// The flight recorder's files (record/episode.h, record/decisions.h): any bytes given to the
// episode decoder, and to the decision store's parser, give a value or an error naming an
// offset, never a crash. Whatever decodes is then replayed — with its recorded policy and
// with a candidate — encoded again, and decoded again to the same samples.
//
// The first byte picks a mode: odd leaves the input as it is (every mutation of a valid file
// then meets a CRC); even first rewrites each frame's CRC, so that mutations reach the frame
// parsers behind them. The rest is an episode or, when it starts with '{', a decision store.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "record/decisions.h"
#include "record/episode.h"
#include "record/replay.h"

namespace record = nodewarden::record;
namespace policy = nodewarden::policy;

namespace {

// Recomputes the CRC of each whole frame after the 12-byte preamble.
void fixCrcs(std::string& bytes) {
  std::size_t at = record::kEpisodeMagic.size() + 4;
  while (at + 9 <= bytes.size()) {
    std::uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= std::uint32_t(std::uint8_t(bytes[at + 1 + i])) << (8 * i);
    if (length > bytes.size() - at - 9) return;
    const std::uint32_t crc = record::crc32(std::string_view(bytes).substr(at, 5 + length));
    for (int i = 0; i < 4; ++i) bytes[at + 5 + length + i] = char((crc >> (8 * i)) & 0xff);
    at += 9 + length;
  }
}

const policy::Policy& candidate() {
  static const policy::Policy p = [] {
    policy::Diagnostics diagnostics;
    return *policy::parsePolicyText(
        R"({"evictionHard": {"allocatableMemory.available": "64Mi", "memory.available": "100Mi"},
            "evictionSoft": {"allocatableMemory.available": "128Mi"},
            "evictionSoftGracePeriod": {"allocatableMemory.available": "2s"},
            "evictionMinimumReclaim": {"allocatableMemory.available": "16Mi"}})",
        diagnostics);
  }();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool fix = (data[0] & 1) == 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (!bytes.empty() && bytes[0] == '{') {
    std::size_t good = 0;
    auto records = record::parseStoreFile(bytes, &good);
    if (good > bytes.size()) std::abort();
    if (records) {
      for (const auto& r : *records) {
        auto again = record::parseStoreFile(record::storeHeaderLine("n") + record::storeLine(r));
        if (!again || again->size() != 1) std::abort();
      }
    }
    (void)record::parseWhyJson(bytes);
    return 0;
  }
  if (fix) fixCrcs(bytes);
  auto episode = record::decodeEpisode(bytes);
  if (!episode) {
    if (episode.error().message.rfind("offset ", 0) != 0) std::abort();
    return 0;
  }
  (void)record::replay(*episode);
  record::ReplayOptions options;
  options.policy = candidate();
  (void)record::replay(*episode, options);
  auto again = record::decodeEpisode(record::encodeEpisode(*episode));
  if (!again || again->samples.size() != episode->samples.size()) std::abort();
  for (std::size_t i = 0; i < episode->samples.size(); ++i) {
    if (again->samples[i].t != episode->samples[i].t ||
        again->samples[i].pods.size() != episode->samples[i].pods.size()) {
      std::abort();
    }
  }
  return 0;
}
