// The one doctest main shared by every test executable. A run in which no test case matched
// its filters fails instead of passing vacuously (e.g. after a test file is renamed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

unsigned gTestCasesRun = 0;
bool gRunEnded = false;  // false for --help and --version
bool gQuery = false;     // --list-test-cases and the like

// Records how many test cases passed the filters in the run.
struct CountingListener : doctest::IReporter {
  explicit CountingListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override { gQuery = true; }
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    gTestCasesRun = stats.numTestCasesPassingFilters;
    gRunEnded = true;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("counting", 1, CountingListener);

// A test executable that needs something the machine may lack (root, real cgroups) defines
// this; a non-empty answer makes the whole executable exit 77, meson's "skipped", with the
// reason on stderr. Never a silent pass.
extern "C" const char* nodewardenSkipReason() __attribute__((weak));

int main(int argc, char** argv) {
  if (nodewardenSkipReason != nullptr) {
    if (const char* reason = nodewardenSkipReason(); reason != nullptr && *reason != '\0') {
      std::fprintf(stderr, "SKIP: %s\n", reason);
      return 77;
    }
  }
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;
  if (result == 0 && gRunEnded && !gQuery && gTestCasesRun == 0) {
    std::fprintf(stderr, "no test case matched the filters: failing rather than passing empty\n");
    return 1;
  }
  return result;
}
