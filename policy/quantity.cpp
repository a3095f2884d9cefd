#include "policy/quantity.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <vector>

namespace nodewarden::policy {
namespace {

constexpr Int128 kNano = 1'000'000'000;
// Binary quantities are capped at 2^63-1 whole units (Kubernetes maxAllowed).
constexpr Int128 kMaxBinaryNanos = Int128(std::numeric_limits<std::int64_t>::max()) * kNano;
// Decimal quantities keep their value up to 10^28 whole units; beyond is an error.
constexpr Int128 kMaxDecimalNanos =
    Int128(10'000'000'000'000'000'000ULL) * Int128(1'000'000'000'000'000'000ULL);
// Quantities in real objects are short; this bounds the work done on hostile input.
constexpr std::size_t kMaxLength = 1024;

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

// An unsigned integer of arbitrary size, just enough to evaluate digits * 2^b / 10^d exactly.
class BigUnsigned {
 public:
  void mulSmall(std::uint32_t factor) {
    std::uint64_t carry = 0;
    for (auto& limb : limbs_) {
      std::uint64_t product = std::uint64_t(limb) * factor + carry;
      limb = std::uint32_t(product);
      carry = product >> 32;
    }
    if (carry != 0) limbs_.push_back(std::uint32_t(carry));
  }
  void addSmall(std::uint32_t addend) {
    std::uint64_t carry = addend;
    for (auto& limb : limbs_) {
      if (carry == 0) return;
      std::uint64_t sum = std::uint64_t(limb) + carry;
      limb = std::uint32_t(sum);
      carry = sum >> 32;
    }
    if (carry != 0) limbs_.push_back(std::uint32_t(carry));
  }
  // Divides in place; returns the remainder.
  std::uint32_t divSmall(std::uint32_t divisor) {
    std::uint64_t remainder = 0;
    for (auto it = limbs_.rbegin(); it != limbs_.rend(); ++it) {
      std::uint64_t current = (remainder << 32) | *it;
      *it = std::uint32_t(current / divisor);
      remainder = current % divisor;
    }
    while (!limbs_.empty() && limbs_.back() == 0) limbs_.pop_back();
    return std::uint32_t(remainder);
  }
  bool isZero() const {
    return std::all_of(limbs_.begin(), limbs_.end(), [](std::uint32_t l) { return l == 0; });
  }
  // The value if it is at most `limit`, else nothing.
  bool toInt128AtMost(Int128 limit, Int128& out) const {
    std::size_t used = limbs_.size();
    while (used > 0 && limbs_[used - 1] == 0) --used;
    if (used > 4) return false;
    UInt128 v = 0;
    for (std::size_t i = used; i-- > 0;) v = (v << 32) | limbs_[i];
    if (v > static_cast<UInt128>(limit)) return false;
    out = static_cast<Int128>(v);
    return true;
  }

 private:
  std::vector<std::uint32_t> limbs_;
};

struct Suffix {
  int base = 10;  // 10 or 2
  int exponent = 0;
  QuantityFormat format = QuantityFormat::DecimalSI;
};

// quantitySuffixer.interpret: the fixed tables first, then a decimal exponent.
bool interpretSuffix(std::string_view s, Suffix& out) {
  struct Entry {
    std::string_view text;
    Suffix suffix;
  };
  static constexpr std::array<Entry, 16> kTable{{
      {"", {10, 0, QuantityFormat::DecimalSI}},
      {"n", {10, -9, QuantityFormat::DecimalSI}},
      {"u", {10, -6, QuantityFormat::DecimalSI}},
      {"m", {10, -3, QuantityFormat::DecimalSI}},
      {"k", {10, 3, QuantityFormat::DecimalSI}},
      {"M", {10, 6, QuantityFormat::DecimalSI}},
      {"G", {10, 9, QuantityFormat::DecimalSI}},
      {"T", {10, 12, QuantityFormat::DecimalSI}},
      {"P", {10, 15, QuantityFormat::DecimalSI}},
      {"E", {10, 18, QuantityFormat::DecimalSI}},
      {"Ki", {2, 10, QuantityFormat::BinarySI}},
      {"Mi", {2, 20, QuantityFormat::BinarySI}},
      {"Gi", {2, 30, QuantityFormat::BinarySI}},
      {"Ti", {2, 40, QuantityFormat::BinarySI}},
      {"Pi", {2, 50, QuantityFormat::BinarySI}},
      {"Ei", {2, 60, QuantityFormat::BinarySI}},
  }};
  for (const auto& entry : kTable) {
    if (entry.text == s) {
      out = entry.suffix;
      return true;
    }
  }
  if (s.size() > 1 && (s[0] == 'e' || s[0] == 'E')) {
    std::string_view digits = s.substr(1);
    if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);  // Go's ParseInt allows it
    std::int32_t exponent = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), exponent);
    if (ec != std::errc() || end != digits.data() + digits.size()) return false;
    out = {10, exponent, QuantityFormat::DecimalExponent};
    return true;
  }
  return false;
}

// Kubernetes keeps the parsed text as the printed form when its fast path sees a value that
// is already canonical (quantity.go ParseQuantity); reproduce that decision.
bool keepsText(std::string_view num, std::string_view denom, const Suffix& suffix) {
  if (num.empty()) return false;  // zero, or only a fraction: shifted starts with '0'
  const auto numLength = std::int64_t(num.size());
  const auto denomLength = std::int64_t(denom.size());
  std::int64_t precision = 0;
  std::int64_t scale = 0;
  if (suffix.base == 10) {
    scale = suffix.exponent;
    precision = 18 - (numLength + denomLength);
  } else {
    if (suffix.exponent < 0 || denomLength != 0) return false;
    precision = 15 - numLength - std::int64_t(float(suffix.exponent) * 3 / 10) - 1;
  }
  if (precision < 0) return false;
  scale -= denomLength;
  if (scale < -9) return false;
  std::string shifted = std::string(num) + std::string(denom);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(shifted.data(), shifted.data() + shifted.size(), value);
  if (ec != std::errc() || end != shifted.data() + shifted.size()) return false;
  if (suffix.base == 2) {
    if (value > (std::numeric_limits<std::int64_t>::max() >> suffix.exponent)) return false;
    return (value & 0x07) != 0;
  }
  bool endsWith000 = shifted.size() >= 3 && shifted.compare(shifted.size() - 3, 3, "000") == 0;
  return scale % 3 == 0 && !endsWith000 && shifted[0] != '0';
}

Error formatError(std::string_view text) {
  return Error{"\"" + std::string(text) +
               "\" is not a quantity (expected a number with an optional suffix, such as "
               "128974848, 129e6, 129M, 123Mi, 1.5Gi or 500m)"};
}

// Removes factors of `base` from `v`; returns how many were removed (at most `maxTimes`).
int removeFactors(Int128& v, int base, int maxTimes) {
  int times = 0;
  while (v != 0 && v % base == 0 && times < maxTimes) {
    v /= base;
    ++times;
  }
  return times;
}

std::string int128ToString(Int128 v) {
  if (v == 0) return "0";
  bool negative = v < 0;
  UInt128 magnitude = negative ? -static_cast<UInt128>(v) : v;
  std::string digits;
  while (magnitude != 0) {
    digits.push_back(char('0' + int(magnitude % 10)));
    magnitude /= 10;
  }
  if (negative) digits.push_back('-');
  std::reverse(digits.begin(), digits.end());
  return digits;
}

std::int64_t roundAwayFromZero(Int128 nanos, Int128 unit) {
  Int128 q = nanos / unit;
  if (nanos % unit != 0) q += nanos > 0 ? 1 : -1;
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  if (q > kMax) return kMax;
  if (q < kMin) return kMin;
  return static_cast<std::int64_t>(q);
}

}  // namespace

Result<Quantity> Quantity::parse(std::string_view text) {
  if (text.empty()) return Error{"empty string is not a quantity"};
  if (text.size() > kMaxLength) {
    return Error{"quantity of " + std::to_string(text.size()) + " characters is too long"};
  }
  // parseQuantityString: sign, leading zeros, numerator, denominator, suffix.
  std::size_t pos = 0;
  const std::size_t end = text.size();
  bool positive = true;
  if (text[0] == '-' || text[0] == '+') {
    positive = text[0] == '+';
    ++pos;
  }
  while (pos < end && text[pos] == '0') ++pos;
  std::size_t numStart = pos;
  while (pos < end && isDigit(text[pos])) ++pos;
  std::string_view num = text.substr(numStart, pos - numStart);
  std::string_view denom;
  if (pos < end && text[pos] == '.') {
    ++pos;
    std::size_t denomStart = pos;
    while (pos < end && isDigit(text[pos])) ++pos;
    denom = text.substr(denomStart, pos - denomStart);
  }
  std::size_t suffixStart = pos;
  while (pos < end && std::string_view("eEinumkKMGTP").find(text[pos]) != std::string_view::npos) {
    ++pos;
  }
  if (pos < end && (text[pos] == '-' || text[pos] == '+')) ++pos;
  while (pos < end && isDigit(text[pos])) ++pos;
  if (pos != end) return formatError(text);
  std::string_view suffixText = text.substr(suffixStart);

  Suffix suffix;
  if (!interpretSuffix(suffixText, suffix)) {
    return Error{"\"" + std::string(text) + "\" has an unknown suffix \"" +
                 std::string(suffixText) +
                 "\" (expected one of n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an "
                 "exponent such as e3; suffixes are case-sensitive)"};
  }

  // value = digits * 10^decimalExponent * 2^binaryExponent, in nano-units.
  std::string digits = std::string(num) + std::string(denom);
  std::int64_t decimalExponent = 9 - std::int64_t(denom.size());
  int binaryExponent = 0;
  if (suffix.base == 10) {
    decimalExponent += suffix.exponent;
  } else {
    binaryExponent = suffix.exponent;
  }
  std::size_t firstNonZero = digits.find_first_not_of('0');
  if (firstNonZero == std::string::npos) return Quantity(0, suffix.format);
  digits.erase(0, firstNonZero);
  while (digits.size() > 1 && digits.back() == '0') {
    digits.pop_back();
    ++decimalExponent;
  }
  const auto length = std::int64_t(digits.size());
  const bool binary = suffix.base == 2;
  const Int128 limit = binary ? kMaxBinaryNanos : kMaxDecimalNanos;
  auto tooLarge = [&] {
    return Error{"\"" + std::string(text) + "\" is too large (at most 10^28 is supported)"};
  };
  // 10^(length-1+decimalExponent) <= value: past 10^37 nano-units it is out of range.
  if (length - 1 + decimalExponent > 37) {
    if (!binary) return tooLarge();
    return Quantity(positive ? kMaxBinaryNanos : -kMaxBinaryNanos, suffix.format);
  }
  // Below 10^-(length+19) the value is under one nano-unit even after a 2^60 suffix.
  QuantityFormat format = suffix.format;
  if (decimalExponent < 0 && -decimalExponent >= length + 19) {
    // Kubernetes prints binary quantities below one unit in decimal.
    return Quantity(positive ? 1 : -1, binary ? QuantityFormat::DecimalSI : format);
  }

  Int128 nanos = 0;
  bool fits = false;
  if (length <= 18) {
    // The common case, exactly in 128 bits: digits < 10^18, times 2^60 at most, stays below
    // 2^120; a multiplication that would overflow falls through to the general path.
    Int128 v = 0;
    for (char c : digits) v = v * 10 + (c - '0');
    v <<= binaryExponent;
    fits = true;
    for (std::int64_t i = 0; i < decimalExponent && fits; ++i) {
      fits = !__builtin_mul_overflow(v, Int128(10), &v);
    }
    if (fits && decimalExponent < 0) {
      Int128 divisor = 1;
      for (std::int64_t i = decimalExponent; i < 0; ++i) divisor *= 10;  // at most 10^37
      const bool inexact = v % divisor != 0;
      v = v / divisor + (inexact ? 1 : 0);  // round up to the next nano-unit, as Kubernetes
    }
    nanos = v;
  }
  if (!fits) {
    BigUnsigned big;
    for (char c : digits) {
      big.mulSmall(10);
      big.addSmall(std::uint32_t(c - '0'));
    }
    for (int i = 0; i < binaryExponent; i += 10) big.mulSmall(1024);
    bool inexact = false;
    for (std::int64_t i = 0; i < decimalExponent; ++i) big.mulSmall(10);
    for (std::int64_t i = decimalExponent; i < 0; ++i) inexact |= big.divSmall(10) != 0;
    if (inexact) big.addSmall(1);  // round up to the next nano-unit, as Kubernetes does
    if (!big.toInt128AtMost(limit, nanos)) nanos = limit + 1;
  }
  if (nanos > limit) {
    if (!binary) return tooLarge();
    nanos = kMaxBinaryNanos;
  }
  if (binary && nanos < kNano) format = QuantityFormat::DecimalSI;
  Quantity result(positive ? nanos : -nanos, format);
  if (keepsText(num, denom, suffix)) result.text_ = std::string(text);
  return result;
}

Quantity Quantity::fromValue(std::int64_t value, QuantityFormat format) {
  return Quantity(Int128(value) * kNano, format);
}

Quantity Quantity::fromMilli(std::int64_t milli, QuantityFormat format) {
  return Quantity(Int128(milli) * 1'000'000, format);
}

std::int64_t Quantity::value() const {
  return roundAwayFromZero(nanos_, kNano);
}

std::int64_t Quantity::milliValue() const {
  return roundAwayFromZero(nanos_, 1'000'000);
}

std::string Quantity::toString() const {
  if (nanos_ == 0) return "0";
  if (!text_.empty()) return text_;
  QuantityFormat format = format_;
  if (format == QuantityFormat::BinarySI) {
    // Small or fractional binary quantities print in decimal, as Kubernetes does.
    if ((nanos_ > -1024 * kNano && nanos_ < 1024 * kNano) || nanos_ % kNano != 0) {
      format = QuantityFormat::DecimalSI;
    }
  }
  if (format == QuantityFormat::BinarySI) {
    Int128 amount = nanos_ / kNano;
    int exponent = removeFactors(amount, 1024, 6);
    static constexpr std::array<std::string_view, 7> kBinary{"",   "Ki", "Mi", "Gi",
                                                             "Ti", "Pi", "Ei"};
    return int128ToString(amount) + std::string(kBinary[std::size_t(exponent)]);
  }
  Int128 amount = nanos_;
  int exponent = -9 + removeFactors(amount, 10, 64);
  // Make the exponent a multiple of three, growing the mantissa.
  int adjust = ((exponent % 3) + 3) % 3;
  for (int i = 0; i < adjust; ++i) amount *= 10;
  exponent -= adjust;
  if (format == QuantityFormat::DecimalExponent) {
    return int128ToString(amount) + (exponent == 0 ? "" : "e" + std::to_string(exponent));
  }
  static constexpr std::array<std::string_view, 10> kDecimal{"n", "u", "m", "",  "k",
                                                             "M", "G", "T", "P", "E"};
  int index = (exponent + 9) / 3;
  if (index >= int(kDecimal.size())) {
    // No SI suffix above E: Kubernetes falls back to exponent notation ("1e21").
    return int128ToString(amount) + "e" + std::to_string(exponent);
  }
  return int128ToString(amount) + std::string(kDecimal[std::size_t(index)]);
}

}  // namespace nodewarden::policy
