// The watch stream: the body the API server (or anything that answers in its place) sends
// after a watch request, through kube::WatchDecoder as kube::Client's watch exchange feeds it
// (splitting the bytes into JSON objects, the event envelope, the trimmed object parse). No
// sockets: the HTTP framing around it is Beast's.
//   The first byte seeds the piece sizes; the rest is the body. It is decoded three times:
//   in one piece; in pieces of 1 to 23 bytes; and in pieces again with the stop flag raised
//   after the k-th callback (k from the first byte).
// Checks: the events and the bad pieces are the same in the same order whatever the pieces
// (the splitter does not depend on where reads or chunks end); every event dumps as strict
// JSON (nothing that is not UTF-8 gets through); nothing is called once stop is raised, and
// what came before it is the start of the whole run; what stays pending is bounded by the
// input.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "kube/json_stream.h"

namespace kube = nodewarden::kube;

namespace {

struct Outcome {
  std::vector<std::string> items;  // "event …" and "bad …: problem", in order
  std::size_t pending = 0;
};

Outcome decode(std::string_view body, unsigned seed, bool whole, std::size_t stopAfter) {
  Outcome out;
  bool stop = false;
  auto counted = [&] {
    if (stopAfter != 0 && out.items.size() >= stopAfter) stop = true;
  };
  kube::WatchDecoder decoder(kube::WatchDecoder::Handlers{
      [&](const nodewarden::policy::Json& event) {
        if (stop) std::abort();                        // called after stop was raised
        out.items.push_back("event " + event.dump());  // throws (and so fails) on bad UTF-8
        counted();
      },
      [&](std::string_view text, const std::string& problem) {
        if (stop) std::abort();
        out.items.push_back("bad " + std::string(text) + ": " + problem);
        counted();
      }});
  if (whole) {
    decoder.feed(body, stop);
  } else {
    unsigned state = seed * 2654435761u + 1;
    while (!body.empty() && !stop) {
      state = state * 1103515245u + 12345u;
      const std::size_t n = std::min<std::size_t>(body.size(), 1 + (state >> 16) % 23);
      decoder.feed(body.substr(0, n), stop);
      body.remove_prefix(n);
    }
  }
  if (!stop) decoder.finish();
  out.pending = decoder.pending();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const Outcome whole = decode(body, data[0], true, 0);
  const Outcome pieces = decode(body, data[0], false, 0);
  if (whole.items != pieces.items) {
    std::fprintf(stderr, "fuzz_watch_stream: %zu items in one piece, %zu in pieces\n",
                 whole.items.size(), pieces.items.size());
    std::abort();
  }
  if (whole.pending != pieces.pending || whole.pending > body.size()) std::abort();
  const std::size_t stopAfter = 1 + data[0] % 4;
  const Outcome stopped = decode(body, data[0], false, stopAfter);
  if (stopped.items.size() > stopAfter) std::abort();
  for (std::size_t i = 0; i < stopped.items.size(); ++i) {
    if (i >= whole.items.size() || stopped.items[i] != whole.items[i]) std::abort();
  }
  return 0;
}
