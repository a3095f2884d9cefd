// The memory line poller without root: a fake usage reader and made-up times.
#include <doctest/doctest.h>

#include "cgroups/detect.h"

using namespace nodewarden;
using namespace nodewarden::cgroups;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

struct FakeUsage {
  std::uint64_t usage = 0;
  bool fail = false;
  MemoryLinePoller::ReadUsage reader() {
    return [this]() -> Result<std::uint64_t> {
      if (fail) return Error{"memory.current: No such device", ENODEV};
      return usage;
    };
  }
};

}  // namespace

TEST_CASE("pollDelay: time to the line over the safety factor, between floor and ceiling") {
  PollTuning tuning;  // floor 2 ms, ceiling 1 s, safety 4, assumed 1 GiB/s
  // 300 MiB at the assumed 1 GiB/s: 293 ms to the line, a poll every 73 ms.
  CHECK(pollDelay(300 * kMiB, 0, tuning) == Duration(73'242'187));
  // Faster growth measured: 2 GiB/s → half that.
  CHECK(pollDelay(300 * kMiB, 2.0 * 1024 * kMiB, tuning) == Duration(36'621'093));
  // Far away: the ceiling; at or past the line, or nearly there: the floor.
  CHECK(pollDelay(std::int64_t(64) * 1024 * kMiB, 0, tuning) == 1s);
  CHECK(pollDelay(0, 0, tuning) == 2ms);
  CHECK(pollDelay(-5, 0, tuning) == 2ms);
  CHECK(pollDelay(1 * kMiB, 0, tuning) == 2ms);
  // The ceiling follows the housekeeping interval.
  tuning.ceiling = 250ms;
  CHECK(pollDelay(std::int64_t(4) * 1024 * kMiB, 0, tuning) == 250ms);
}

TEST_CASE("MemoryLinePoller: a crossing is reported once, dated by the previous poll") {
  FakeUsage fake{100 * kMiB};
  MemoryLinePoller poller(fake.reader(), PollTuning{});
  poller.setLines({700 * kMiB, 400 * kMiB});
  CHECK(poller.lines() == std::vector<std::uint64_t>{400 * kMiB, 700 * kMiB});
  const SteadyTime t0{};

  auto first = poller.poll(t0);
  REQUIRE(first);
  CHECK_FALSE(first->crossed);
  CHECK(first->usage == 100 * kMiB);
  // 300 MiB to the closest line at the assumed 1 GiB/s.
  CHECK(first->next == Duration(73'242'187));

  // Growing at 2 GiB/s: the period halves at once (fast attack).
  fake.usage = 300 * kMiB;
  auto second = poller.poll(t0 + 100ms);
  REQUIRE(second);
  CHECK_FALSE(second->crossed);
  CHECK(second->growthBytesPerSecond == doctest::Approx(2000.0 * kMiB));
  CHECK(second->next == Duration(12'500'000));  // 100 MiB at 2000 MiB/s, over 4

  // Past 400 MiB: crossed, dated by the previous poll (an upper bound on latency).
  fake.usage = 410 * kMiB;
  auto third = poller.poll(t0 + 110ms);
  REQUIRE(third);
  CHECK(third->crossed);
  CHECK(third->crossedAfter == t0 + 100ms);
  // Still above it: not reported again; the next line sets the pace.
  fake.usage = 420 * kMiB;
  auto fourth = poller.poll(t0 + 120ms);
  REQUIRE(fourth);
  CHECK_FALSE(fourth->crossed);
  CHECK(fourth->next < 1s);

  // Past both lines at once: one report; then a fast poll to see a fall and a new rise.
  fake.usage = 800 * kMiB;
  auto fifth = poller.poll(t0 + 130ms);
  REQUIRE(fifth);
  CHECK(fifth->crossed);
  CHECK(fifth->next == 20ms);
  // Evicted: below both; growth decays instead of dropping to zero.
  fake.usage = 200 * kMiB;
  auto sixth = poller.poll(t0 + 150ms);
  REQUIRE(sixth);
  CHECK_FALSE(sixth->crossed);
  CHECK(sixth->growthBytesPerSecond > 0);
  // And up again: a new crossing.
  fake.usage = 450 * kMiB;
  auto seventh = poller.poll(t0 + 160ms);
  REQUIRE(seventh);
  CHECK(seventh->crossed);
}

TEST_CASE("MemoryLinePoller: new lines below today's usage count as a crossing once") {
  FakeUsage fake{500 * kMiB};
  MemoryLinePoller poller(fake.reader(), PollTuning{});
  const SteadyTime t0{};
  auto none = poller.poll(t0);
  REQUIRE(none);
  CHECK_FALSE(none->crossed);  // no lines: nothing to report
  CHECK(none->next == 1s);
  poller.setLines({400 * kMiB});
  auto armed = poller.poll(t0 + 10ms);
  REQUIRE(armed);
  CHECK(armed->crossed);
  CHECK(armed->crossedAfter == t0 + 10ms);  // no earlier poll knew this line
  auto again = poller.poll(t0 + 20ms);
  REQUIRE(again);
  CHECK_FALSE(again->crossed);
  // The same lines set again change nothing.
  poller.setLines({400 * kMiB});
  auto same = poller.poll(t0 + 30ms);
  REQUIRE(same);
  CHECK_FALSE(same->crossed);
}

TEST_CASE("MemoryLinePoller: a failed read is an error and keeps the last figures") {
  FakeUsage fake{100 * kMiB};
  MemoryLinePoller poller(fake.reader(), PollTuning{});
  poller.setLines({400 * kMiB});
  const SteadyTime t0{};
  REQUIRE(poller.poll(t0));
  fake.fail = true;
  auto failed = poller.poll(t0 + 10ms);
  REQUIRE_FALSE(failed);
  CHECK(failed.error().sysErrno == ENODEV);
  fake.fail = false;
  fake.usage = 450 * kMiB;
  auto crossed = poller.poll(t0 + 20ms);
  REQUIRE(crossed);
  CHECK(crossed->crossed);
  CHECK(crossed->crossedAfter == t0);
}

TEST_CASE("MemoryLinePoller: a usage read elsewhere counts as a poll of it") {
  // Two pollers, one polling and one told what the agent's cycle read at the same times: the
  // same samples, and the next poll of each is timed the same.
  FakeUsage fake{100 * kMiB};
  MemoryLinePoller polled(fake.reader(), PollTuning{});
  FakeUsage never{0, true};  // observe() never reads
  MemoryLinePoller told(never.reader(), PollTuning{});
  polled.setLines({400 * kMiB});
  told.setLines({400 * kMiB});
  const SteadyTime t0{};
  const std::uint64_t usages[] = {100 * kMiB, 300 * kMiB, 350 * kMiB, 390 * kMiB, 380 * kMiB};
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    fake.usage = usages[i];
    const SteadyTime at = t0 + i * 100ms;
    auto a = polled.poll(at);
    REQUIRE(a);
    const MemoryLinePoller::Sample b = told.observe(usages[i], at);
    CHECK(b.usage == a->usage);
    CHECK(b.crossed == a->crossed);
    CHECK(b.next == a->next);
    CHECK(b.growthBytesPerSecond == a->growthBytesPerSecond);
  }
  // And a poll after it carries on from what it was told: the crossing is reported.
  never.fail = false;
  never.usage = 400 * kMiB;
  auto crossed = told.poll(t0 + 500ms);
  REQUIRE(crossed);
  CHECK(crossed->crossed);
  CHECK(crossed->crossedAfter == t0 + 400ms);
}
