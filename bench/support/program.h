// bench/support: the frame of a benchmark program — its command line (--help, --quick and
// named options, each read by a function that says whether the value is good), the timing of
// one call whose result is freed outside the timed part, and the heap in use.
#pragma once

#include <malloc.h>

#include <cstddef>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "bench/support/measure.h"
#include "bench/support/report.h"

namespace nodewarden::bench {

// "--name value" or "--name=value": `set` takes the value and says whether it is good; when
// not, `error` is printed and the program exits with status 2.
struct Option {
  std::string_view name;
  std::function<bool(std::string_view)> set;
  const char* error;
};

// Reads argv. nullopt: go on; otherwise the status to exit with (0 after --help or -h, which
// print `usage` on stdout; 2 on a bad or unknown argument, after a message on stderr).
// --quick sets `quick` when the program takes it (non-null).
inline std::optional<int> parseArgs(int argc, char** argv, const char* usage, bool* quick,
                                    std::initializer_list<Option> options) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (quick != nullptr && arg == "--quick") {
      *quick = true;
      continue;
    }
    bool matched = false;
    for (const Option& option : options) {
      const auto value = optionValue(option.name, i, argc, argv, matched);
      if (!matched) continue;
      if (!value || !option.set(*value)) {
        if (value) std::fprintf(stderr, "%s\n", option.error);
        return 2;
      }
      break;
    }
    if (!matched) {
      std::fprintf(stderr, "unknown argument: %s\n%s", argv[i], usage);
      return 2;
    }
  }
  return std::nullopt;
}

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
