// bench/support: the frame of a benchmark program — the timing of one call whose result is
// freed outside the timed part, and the heap in use (its command line: report.h's Args).
#pragma once

#include <malloc.h>

#include <cstddef>
#include <cstdio>

#include "bench/support/measure.h"
#include "bench/support/report.h"

namespace nodewarden::bench {

// A measure() step that times `call` alone: its result is kept from the optimiser and freed
// after the clock stops.
template <typename F>
auto timed(F call) {
  return [call]() mutable {
    const auto t0 = steadyNow();
    auto result = call();
    const double ns = nanosSince(t0);
    doNotOptimize(result);
    return ns;
  };
}

// Heap bytes in use (mallinfo2), for a before/after difference; `trim` first gives free memory
// back to the system (malloc_trim).
inline std::size_t heapInUse(bool trim) {
  if (trim) ::malloc_trim(0);
  const struct mallinfo2 info = ::mallinfo2();
  return info.uordblks + info.hblkhd;
}

}  // namespace nodewarden::bench
