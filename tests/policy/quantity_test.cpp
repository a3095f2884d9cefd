// Kubernetes resource.Quantity: the grammar, canonical printing and rounding, with cases
// taken (as facts) from apimachinery's quantity_test.go.
#include <doctest/doctest.h>

#include <string>

#include "policy/quantity.h"

using nodewarden::policy::Int128;
using nodewarden::policy::Quantity;
using nodewarden::policy::QuantityFormat;

namespace {

Quantity q(const std::string& text) {
  auto r = Quantity::parse(text);
  REQUIRE_MESSAGE(r.ok(), text << ": " << (r.ok() ? "" : r.error().message));
  return r.value();
}

// value * 10^exponent in nano-units.
Int128 nanos(long long mantissa, int exponent) {
  Int128 v = mantissa;
  for (int e = exponent + 9; e > 0; --e) v *= 10;
  for (int e = exponent + 9; e < 0; ++e) v /= 10;
  return v;
}

Int128 binary(long long mantissa, int shift) {
  return (Int128(mantissa) << shift) * 1'000'000'000;
}

}  // namespace

TEST_CASE("quantity: decimal and binary suffixes") {
  CHECK(q("1").nanoValue() == nanos(1, 0));
  CHECK(q("1Ki").nanoValue() == binary(1, 10));
  CHECK(q("8Ki").nanoValue() == binary(8, 10));
  CHECK(q("7Mi").nanoValue() == binary(7, 20));
  CHECK(q("6Gi").nanoValue() == binary(6, 30));
  CHECK(q("5Ti").nanoValue() == binary(5, 40));
  CHECK(q("4Pi").nanoValue() == binary(4, 50));
  CHECK(q("3Ei").nanoValue() == binary(3, 60));
  CHECK(q("5n").nanoValue() == 5);
  CHECK(q("4u").nanoValue() == 4000);
  CHECK(q("3m").nanoValue() == 3'000'000);
  CHECK(q("8k").nanoValue() == nanos(8, 3));
  CHECK(q("7M").nanoValue() == nanos(7, 6));
  CHECK(q("6G").nanoValue() == nanos(6, 9));
  CHECK(q("5T").nanoValue() == nanos(5, 12));
  CHECK(q("2P").nanoValue() == nanos(2, 15));
  CHECK(q("1E").nanoValue() == nanos(1, 18));
  CHECK(q("12E").nanoValue() == nanos(12, 18));
  CHECK(q("1Ki").format() == QuantityFormat::BinarySI);
  CHECK(q("1k").format() == QuantityFormat::DecimalSI);
  CHECK(q("1e3").format() == QuantityFormat::DecimalExponent);
}

TEST_CASE("quantity: exponents, decimals and signs") {
  CHECK(q("1e3").nanoValue() == nanos(1, 3));
  CHECK(q("1E6").nanoValue() == nanos(1, 6));
  CHECK(q("1E-3").nanoValue() == nanos(1, -3));
  CHECK(q("1.3E+6").nanoValue() == nanos(13, 5));
  CHECK(q("1.2e3").nanoValue() == nanos(12, 2));
  CHECK(q("0.5e-1").nanoValue() == nanos(5, -2));
  CHECK(q("100.035k").nanoValue() == nanos(100035, 0));
  CHECK(q("0.0005k").nanoValue() == nanos(5, -1));
  CHECK(q("9.01").nanoValue() == nanos(901, -2));
  CHECK(q(".001").nanoValue() == nanos(1, -3));
  CHECK(q("1.").nanoValue() == nanos(1, 0));
  CHECK(q("1.G").nanoValue() == nanos(1, 9));
  CHECK(q("1.5Gi").nanoValue() == binary(3, 29));
  CHECK(q("0.5Mi").nanoValue() == binary(512, 10));
  CHECK(q("-1.5Gi").nanoValue() == -binary(3, 29));
  CHECK(q("+1Ki").nanoValue() == binary(1, 10));
  CHECK(q("0").isZero());
  CHECK(q("0Mi").isZero());
  CHECK(q("-0").isZero());
  CHECK(q("000").isZero());
}

TEST_CASE("quantity: values finer than a nano-unit round up, away from zero") {
  CHECK(q("3.001n").nanoValue() == 4);
  CHECK(q("1.1E-9").nanoValue() == 2);
  CHECK(q("0.0000000001").nanoValue() == 1);
  CHECK(q("0.0000000005").nanoValue() == 1);
  CHECK(q("0.9n").nanoValue() == 1);
  CHECK(q("0.00000012345").nanoValue() == 124);
  CHECK(q("1e-1000").nanoValue() == 1);
  CHECK(q("-0.9n").nanoValue() == -1);
  // A binary quantity below one unit becomes decimal, as in Kubernetes.
  CHECK(q("0.000000000001Ki").nanoValue() == 2);
  CHECK(q("0.000000000001Ki").format() == QuantityFormat::DecimalSI);
  CHECK(q("0.000000000001Ki").toString() == "2n");
}

TEST_CASE("quantity: Value() and MilliValue() round away from zero") {
  CHECK(q("100m").milliValue() == 100);
  CHECK(q("100m").value() == 1);
  CHECK(q("1n").milliValue() == 1);
  CHECK(q("1.5").value() == 2);
  CHECK(q("-1.5").value() == -2);
  CHECK(q("2").milliValue() == 2000);
  CHECK(q("1Gi").value() == 1073741824);
  CHECK(q("0.5").value() == 1);
}

TEST_CASE("quantity: overflow") {
  // Binary quantities are capped at 2^63-1, as in Kubernetes.
  CHECK(q("9Ei").value() == 9223372036854775807LL);
  CHECK(q("9Ei").toString() == "9223372036854775807");
  CHECK(q("9223372036854775807Ki").value() == 9223372036854775807LL);
  // Decimal quantities keep their value above int64 (Kubernetes does too)...
  CHECK(q("10E").toString() == "10E");
  CHECK(q("10000000000000000000").toString() == "10E");
  CHECK(q("9999999999999999999").toString() == "9999999999999999999");
  CHECK(q("10E").value() == 9223372036854775807LL);  // Value() saturates
  // ...up to a bound far beyond any node; past it the error says so.
  auto huge = Quantity::parse("1e100");
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().message == "\"1e100\" is too large (at most 10^28 is supported)");
  CHECK_FALSE(Quantity::parse("1e2147483648").ok());
}

TEST_CASE("quantity: canonical printing") {
  struct Case {
    const char* input;
    const char* printed;
  };
  const Case cases[] = {
      {"1024Mi", "1Gi"},
      {"307200Ki", "300Mi"},
      {"1025024Mi", "1001Gi"},
      {"1024Gi", "1Ti"},
      {"5000m", "5"},
      {"0.5", "500m"},
      {"1000M", "1G"},
      {"0.001T", "1G"},
      {"1000u", "1m"},
      {"1.08", "1080m"},
      {"1080000000n", "1080m"},
      {".001e12", "1e9"},
      {"0.001e0", "1e-3"},
      {"1000e-12", "1e-9"},
      {"00", "0"},
      {"1.5Gi", "1536Mi"},
      {"1e14", "100e12"},
      {"1e13", "10e12"},
      {"0.5e0", "500e-3"},
      {"10.035M", "10.035M"},
      {"5.444T", "5.444T"},
      {"40.1T", "40100G"},
      {"2.5P", "2500T"},
      {"1.01E", "1010P"},
      {"8.1k", "8100"},
      {"9.01", "9010m"},
      {"0.0005k", "500m"},
      {"100.035Ki", "102435840m"},
      {"0.05Gi", "53687091200m"},
      {".001Ki", "1024m"},
      {".000001Ki", "1024u"},
      {".000000001Ki", "1024n"},
      {"1000E", "1e21"},
      {"1.2e3", "1200"},
      {"1.3E+6", "1300e3"},
      {"-1024Mi", "-1Gi"},
      {"0Ki", "0"},
      {"1536Mi", "1536Mi"},
      {"1025", "1025"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.input);
    CHECK(q(c.input).toString() == c.printed);
  }
}

TEST_CASE("quantity: text already in canonical shape prints back verbatim") {
  // Kubernetes keeps such text as the String() form.
  for (const char* text : {"1E6", "1e3", "50k", "12E", "7.123456M", "6.987654321G", "1.", "1.G",
                           "1Ki", "+1", "-1Ki", "100Mi", "100m"}) {
    CAPTURE(text);
    CHECK(q(text).toString() == text);
  }
}

TEST_CASE("quantity: built from numbers") {
  CHECK(Quantity::fromValue(1, QuantityFormat::DecimalSI).toString() == "1");
  CHECK(Quantity::fromValue(1000, QuantityFormat::DecimalSI).toString() == "1k");
  CHECK(Quantity::fromValue(1234000, QuantityFormat::DecimalSI).toString() == "1234k");
  CHECK(Quantity::fromValue(1024, QuantityFormat::BinarySI).toString() == "1Ki");
  CHECK(Quantity::fromValue(1048576, QuantityFormat::BinarySI).toString() == "1Mi");
  CHECK(Quantity::fromValue(5, QuantityFormat::BinarySI).toString() == "5");
  CHECK(Quantity::fromValue(1025, QuantityFormat::BinarySI).toString() == "1025");
  CHECK(Quantity::fromValue(1572864000, QuantityFormat::BinarySI).toString() == "1500Mi");
  CHECK(Quantity::fromValue(1610612736, QuantityFormat::BinarySI).toString() == "1536Mi");
  CHECK(Quantity::fromValue(1000000, QuantityFormat::DecimalExponent).toString() == "1e6");
  CHECK(Quantity::fromMilli(1, QuantityFormat::DecimalSI).toString() == "1m");
  CHECK(Quantity::fromMilli(1000, QuantityFormat::DecimalSI).toString() == "1");
  CHECK(Quantity::fromMilli(1024, QuantityFormat::BinarySI).toString() == "1024m");
  CHECK(Quantity::fromValue(0, QuantityFormat::BinarySI).toString() == "0");
  CHECK(Quantity::fromValue(-1024, QuantityFormat::BinarySI).toString() == "-1Ki");
}

TEST_CASE("quantity: comparison is by value, not by format") {
  CHECK(q("1Gi") == q("1024Mi"));
  CHECK(q("1k") == q("1e3"));
  CHECK(q("100m") > q("50m"));
  CHECK(q("50m") < q("100m"));
  CHECK(q("10000T") > q("100Gi"));
  CHECK(q("0") == q("0Ki"));
}

TEST_CASE("quantity: malformed text is an error that says what is wrong") {
  struct Case {
    const char* input;
    const char* message;
  };
  const char* notAQuantity =
      "\" is not a quantity (expected a number with an optional suffix, such as 128974848, "
      "129e6, 129M, 123Mi, 1.5Gi or 500m)";
  const Case formatCases[] = {{"1.1.M", ""}, {"1+1.0M", ""}, {"0.1am", ""}, {"aoeu", ""},
                              {" 1", ""},    {"1 ", ""},     {"1Mi ", ""},  {"1.5.", ""}};
  for (const auto& c : formatCases) {
    CAPTURE(c.input);
    auto r = Quantity::parse(c.input);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "\"" + std::string(c.input) + notAQuantity);
  }
  const Case suffixCases[] = {{"0.1mi", "mi"},   {".5i", "i"}, {"1i", "i"}, {"-3.01i", "i"},
                              {"-3.01e-", "e-"}, {"9x", ""},   {"1KI", ""}, {"1kb", ""},
                              {"1MI", ""},       {"1K", "K"},  {"1e", "e"}, {"1Kii", "Kii"},
                              {"--1", "-1"}};
  for (const auto& c : suffixCases) {
    CAPTURE(c.input);
    auto r = Quantity::parse(c.input);
    REQUIRE_FALSE(r.ok());
    if (std::string(c.message).empty()) continue;  // rejected by the scanner instead
    CHECK(r.error().message ==
          "\"" + std::string(c.input) + "\" has an unknown suffix \"" + c.message +
              "\" (expected one of n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an "
              "exponent such as e3; suffixes are case-sensitive)");
  }
  auto empty = Quantity::parse("");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message == "empty string is not a quantity");
  CHECK_FALSE(Quantity::parse(std::string(2000, '1')).ok());
}

TEST_CASE("quantity: Kubernetes' scanner accepts a lone sign or point as zero") {
  // parseQuantityString yields "0" for "-", "+", "." and "-." (TestParseQuantityString),
  // and a suffix with no number in front is a zero of that suffix.
  for (const char* text : {"-", "+", ".", "-.", "Mi", "k"}) {
    CAPTURE(text);
    CHECK(q(text).isZero());
  }
}
