// bench/support: what the benchmarks that run processes and sandboxes share — stopping on
// SIGINT/SIGTERM so every loop unwinds and the sandbox is removed, monotonic time, sleeping,
// small files.
#pragma once

#include <time.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/support/measure.h"

namespace nodewarden::bench {

// The stop flag, stopped() and requestStop() are in bench/support/measure.h, whose measure()
// checks them too.

inline void installStopHandlers() {
  struct sigaction action {};
  action.sa_handler = [](int) { gStop = 1; };
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: blocking calls return EINTR at once
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

inline std::int64_t monotonicNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline void sleepMillis(int millis) {
  timespec ts{millis / 1000, long(millis % 1000) * 1'000'000};
  ::nanosleep(&ts, nullptr);
}

inline bool writeText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return bool(out);
}

inline std::string readText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace nodewarden::bench
