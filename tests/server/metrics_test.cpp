// The Prometheus registry: exposition text compared with golden strings.
#include "server/metrics.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using nodewarden::server::formatMetricValue;
using nodewarden::server::latencyBuckets;
using nodewarden::server::MetricsRegistry;

TEST_CASE("a counter with labels, a gauge and a histogram render in registration order") {
  MetricsRegistry registry;
  auto& evictions =
      registry.counter("nodewarden_evictions_total", "Pods evicted.", {"signal", "reason"});
  auto& pods = registry.gauge("nodewarden_pods", "Pods on the node.");
  auto& scan =
      registry.histogram("nodewarden_scan_duration_seconds", "Scan time.", {}, {0.01, 0.1, 1});

  evictions.add({"memory.available", "hard"});
  evictions.add({"memory.available", "hard"}, 2);
  evictions.add({"allocatableMemory.available", "soft"}, 0.5);
  pods.set({}, 17);
  scan.observe({}, 0.0078125);  // binary fractions: the sum below is exact
  scan.observe({}, 0.0625);
  scan.observe({}, 0.0625);
  scan.observe({}, 7);

  CHECK(registry.render() ==
        "# HELP nodewarden_evictions_total Pods evicted.\n"
        "# TYPE nodewarden_evictions_total counter\n"
        "nodewarden_evictions_total{signal=\"allocatableMemory.available\",reason=\"soft\"} 0.5\n"
        "nodewarden_evictions_total{signal=\"memory.available\",reason=\"hard\"} 3\n"
        "# HELP nodewarden_pods Pods on the node.\n"
        "# TYPE nodewarden_pods gauge\n"
        "nodewarden_pods 17\n"
        "# HELP nodewarden_scan_duration_seconds Scan time.\n"
        "# TYPE nodewarden_scan_duration_seconds histogram\n"
        "nodewarden_scan_duration_seconds_bucket{le=\"0.01\"} 1\n"
        "nodewarden_scan_duration_seconds_bucket{le=\"0.1\"} 3\n"
        "nodewarden_scan_duration_seconds_bucket{le=\"1\"} 3\n"
        "nodewarden_scan_duration_seconds_bucket{le=\"+Inf\"} 4\n"
        "nodewarden_scan_duration_seconds_sum 7.1328125\n"
        "nodewarden_scan_duration_seconds_count 4\n");
  CHECK(evictions.value({"memory.available", "hard"}) == 3);
  CHECK(evictions.value({"nodefs.available", "hard"}) == 0);
  CHECK(scan.count({}) == 4);
  CHECK(registry.misuses() == 0);
}

TEST_CASE("histogram buckets are cumulative per series, with le last among the labels") {
  MetricsRegistry registry;
  auto& latency = registry.histogram("nodewarden_eviction_latency_seconds", "Crossing to kill.",
                                     {"signal"}, {1, 0.5, 2, 1});  // unsorted, duplicated
  CHECK(latency.upperBounds() == std::vector<double>{0.5, 1, 2});
  latency.observe({"pids.available"}, 0.5);  // on a bound: that bucket
  latency.observe({"memory.available"}, 0.25);
  latency.observe({"memory.available"}, 1.5);
  latency.observe({"memory.available"}, 3);
  CHECK(registry.render() ==
        "# HELP nodewarden_eviction_latency_seconds Crossing to kill.\n"
        "# TYPE nodewarden_eviction_latency_seconds histogram\n"
        "nodewarden_eviction_latency_seconds_bucket{signal=\"memory.available\",le=\"0.5\"} 1\n"
        "nodewarden_eviction_latency_seconds_bucket{signal=\"memory.available\",le=\"1\"} 1\n"
        "nodewarden_eviction_latency_seconds_bucket{signal=\"memory.available\",le=\"2\"} 2\n"
        "nodewarden_eviction_latency_seconds_bucket{signal=\"memory.available\",le=\"+Inf\"} 3\n"
        "nodewarden_eviction_latency_seconds_sum{signal=\"memory.available\"} 4.75\n"
        "nodewarden_eviction_latency_seconds_count{signal=\"memory.available\"} 3\n"
        "nodewarden_eviction_latency_seconds_bucket{signal=\"pids.available\",le=\"0.5\"} 1\n"
        "nodewarden_eviction_latency_seconds_bucket{signal=\"pids.available\",le=\"1\"} 1\n"
        "nodewarden_eviction_latency_seconds_bucket{signal=\"pids.available\",le=\"2\"} 1\n"
        "nodewarden_eviction_latency_seconds_bucket{signal=\"pids.available\",le=\"+Inf\"} 1\n"
        "nodewarden_eviction_latency_seconds_sum{signal=\"pids.available\"} 0.5\n"
        "nodewarden_eviction_latency_seconds_count{signal=\"pids.available\"} 1\n");
}

TEST_CASE("label values and help text are escaped") {
  MetricsRegistry registry;
  auto& gauge =
      registry.gauge("nodewarden_test", "Back\\slash and\nnewline, \"quotes\" kept.", {"path"});
  gauge.set({"C:\\dir \"x\"\nnext"}, 1);
  CHECK(registry.render() ==
        "# HELP nodewarden_test Back\\\\slash and\\nnewline, \"quotes\" kept.\n"
        "# TYPE nodewarden_test gauge\n"
        "nodewarden_test{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n");
}

TEST_CASE("numbers print as integers when integral, else the shortest round trip") {
  CHECK(formatMetricValue(0) == "0");
  CHECK(formatMetricValue(-0.0) == "0");
  CHECK(formatMetricValue(3) == "3");
  CHECK(formatMetricValue(-42) == "-42");
  CHECK(formatMetricValue(1073741824) == "1073741824");
  CHECK(formatMetricValue(9007199254740993.0) == "9007199254740992");  // nearest double
  CHECK(formatMetricValue(0.1) == "0.1");
  CHECK(formatMetricValue(0.0025) == "0.0025");
  CHECK(formatMetricValue(2.5) == "2.5");
  CHECK(formatMetricValue(1.0 / 3) == "0.3333333333333333");
  CHECK(formatMetricValue(1e-5) == "1e-05");
  CHECK(formatMetricValue(1e20) == "1e+20");
  CHECK(formatMetricValue(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(formatMetricValue(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(formatMetricValue(std::nan("")) == "NaN");
  for (const double value : {0.1, 0.7, 123.456, 1e-300, 6.02214076e23, 0.30000000000000004}) {
    CHECK(std::stod(formatMetricValue(value)) == value);
  }
}

TEST_CASE("families exist from the start; labelled ones show samples once they have series") {
  MetricsRegistry registry;
  registry.counter("a_total", "A.");
  registry.gauge("b", "");
  registry.counter("c_total", "C.", {"verdict"});
  registry.histogram("d_seconds", "D.", {}, {1});
  registry.histogram("e_seconds", "E.", {"kind"}, {1});
  CHECK(registry.render() ==
        "# HELP a_total A.\n"
        "# TYPE a_total counter\n"
        "a_total 0\n"
        "# HELP b\n"
        "# TYPE b gauge\n"
        "b 0\n"
        "# HELP c_total C.\n"
        "# TYPE c_total counter\n"
        "# HELP d_seconds D.\n"
        "# TYPE d_seconds histogram\n"
        "d_seconds_bucket{le=\"1\"} 0\n"
        "d_seconds_bucket{le=\"+Inf\"} 0\n"
        "d_seconds_sum 0\n"
        "d_seconds_count 0\n"
        "# HELP e_seconds E.\n"
        "# TYPE e_seconds histogram\n");
  CHECK(MetricsRegistry().render().empty());
}

TEST_CASE("series sort by label values, whatever the order of updates") {
  MetricsRegistry registry;
  auto& condition = registry.gauge("nodewarden_node_condition", "Conditions.", {"condition"});
  condition.set({"PIDPressure"}, 0);
  condition.set({"MemoryPressure"}, 1);
  condition.set({"DiskPressure"}, 0);
  condition.add({"MemoryPressure"}, 0.5);
  CHECK(registry.render() ==
        "# HELP nodewarden_node_condition Conditions.\n"
        "# TYPE nodewarden_node_condition gauge\n"
        "nodewarden_node_condition{condition=\"DiskPressure\"} 0\n"
        "nodewarden_node_condition{condition=\"MemoryPressure\"} 1.5\n"
        "nodewarden_node_condition{condition=\"PIDPressure\"} 0\n");
}

TEST_CASE("gauge clear() and remove() drop series for state that went away") {
  MetricsRegistry registry;
  auto& available = registry.gauge("nodewarden_signal_available_bytes", "Available.", {"signal"});
  available.set({"memory.available"}, 100);
  available.set({"nodefs.available"}, 200);
  available.set({"memory.available"}, 50);  // overwrites
  CHECK(available.value({"memory.available"}) == 50);
  available.remove({"nodefs.available"});
  CHECK(registry.render() ==
        "# HELP nodewarden_signal_available_bytes Available.\n"
        "# TYPE nodewarden_signal_available_bytes gauge\n"
        "nodewarden_signal_available_bytes{signal=\"memory.available\"} 50\n");
  available.clear();
  CHECK(registry.render() ==
        "# HELP nodewarden_signal_available_bytes Available.\n"
        "# TYPE nodewarden_signal_available_bytes gauge\n");
  CHECK(available.value({"memory.available"}) == 0);
}

TEST_CASE("registering the same family again returns it; references stay valid") {
  MetricsRegistry registry;
  auto& first = registry.counter("x_total", "X.", {"a"});
  for (int i = 0; i < 100; ++i) registry.gauge("g" + std::to_string(i), "G.");
  auto& again = registry.counter("x_total", "X.", {"a"});
  CHECK(&first == &again);
  first.add({"v"});
  again.add({"v"});
  CHECK(first.value({"v"}) == 2);
  auto& histogram = registry.histogram("h_seconds", "H.", {}, latencyBuckets());
  CHECK(&registry.histogram("h_seconds", "H.", {}, latencyBuckets()) == &histogram);
  CHECK(registry.misuses() == 0);
}

TEST_CASE("latencyBuckets() spans 1 ms to 30 s") {
  CHECK(latencyBuckets() == std::vector<double>{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                0.5, 1, 2.5, 5, 10, 30});
  MetricsRegistry registry;
  auto& h = registry.histogram("l_seconds", "L.", {}, latencyBuckets());
  h.observe({}, 0.003);
  const std::string text = registry.render();
  CHECK(text.find("l_seconds_bucket{le=\"0.0025\"} 0\n") != std::string::npos);
  CHECK(text.find("l_seconds_bucket{le=\"0.005\"} 1\n") != std::string::npos);
  CHECK(text.find("l_seconds_bucket{le=\"30\"} 1\n") != std::string::npos);
  CHECK(text.find("l_seconds_bucket{le=\"+Inf\"} 1\n") != std::string::npos);
}

#ifdef NDEBUG
// Misuse asserts in debug builds (the tests' default), so only a release build can check that
// it is ignored and counted instead of crashing.
TEST_CASE("misuse is ignored and counted in release builds") {
  MetricsRegistry registry;
  auto& counter = registry.counter("m_total", "M.", {"a", "b"});
  counter.add({"only-one"});
  counter.add({"x", "y"}, -1);
  counter.add({"x", "y"}, std::nan(""));
  registry.gauge("m_total", "clash");       // a counter already has the name
  registry.counter("bad name", "invalid");  // not a metric name
  registry.histogram("h", "H.", {"le"}, {1});
  CHECK(registry.misuses() == 6);
  CHECK(registry.render() ==
        "# HELP m_total M.\n"
        "# TYPE m_total counter\n");
}
#endif
