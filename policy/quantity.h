// Kubernetes resource.Quantity: parsing, canonical printing, comparison.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace nodewarden::policy {

__extension__ typedef __int128 Int128;
__extension__ typedef unsigned __int128 UInt128;

// How a quantity prints, taken from the suffix it was written with (as Kubernetes does).
enum class QuantityFormat { DecimalExponent, BinarySI, DecimalSI };

// A Kubernetes resource.Quantity held exactly in nano-units.
//
// Grammar (apimachinery pkg/api/resource/quantity.go):
//   quantity ::= signedNumber suffix
//   suffix   ::= Ki | Mi | Gi | Ti | Pi | Ei | n | u | m | "" | k | M | G | T | P | E
//              | ("e" | "E") signedInteger
//   number   ::= digits | digits "." digits | digits "." | "." digits
// Suffixes are case-sensitive. Values finer than 1n round up (away from zero) to the next
// nano-unit, as Kubernetes does. Binary (Ki..Ei) quantities above 2^63-1 are capped there, as
// Kubernetes does; decimal ones keep their value up to 10^28 units, and anything larger is
// rejected as overflow (Kubernetes would keep it, but no resource on a node comes near).
// Like Kubernetes, a quantity parsed from text that is already in canonical shape prints that
// text back verbatim ("7.123456M", "1E6"); all others print canonically.
class Quantity {
 public:
  // Zero, printed as "0".
  Quantity() = default;

  // Parses `text` exactly as Kubernetes' ParseQuantity does. The error says what is wrong
  // ("unknown suffix \"x\"", "value too large", ...) but not where: callers add the path.
  static Result<Quantity> parse(std::string_view text);

  // resource.NewQuantity(value, format) and resource.NewMilliQuantity(milli, format).
  static Quantity fromValue(std::int64_t value, QuantityFormat format);
  static Quantity fromMilli(std::int64_t milli, QuantityFormat format);

  // Whole units, rounded away from zero (Kubernetes Value()), saturating at the int64 range.
  std::int64_t value() const;
  // Thousandths, rounded away from zero (Kubernetes MilliValue()); used for cpu.
  std::int64_t milliValue() const;
  Int128 nanoValue() const { return nanos_; }

  bool isZero() const { return nanos_ == 0; }
  int sign() const { return nanos_ < 0 ? -1 : (nanos_ > 0 ? 1 : 0); }
  QuantityFormat format() const { return format_; }

  // The canonical form Kubernetes prints (String()): "100Mi", "1536Mi", "1500m", "2k", "1e3".
  std::string toString() const;

  // Comparison is by value only; the format does not take part.
  friend std::strong_ordering operator<=>(const Quantity& a, const Quantity& b) {
    return a.nanos_ <=> b.nanos_;
  }
  friend bool operator==(const Quantity& a, const Quantity& b) { return a.nanos_ == b.nanos_; }

 private:
  Quantity(Int128 nanos, QuantityFormat format) : nanos_(nanos), format_(format) {}

  Int128 nanos_ = 0;
  QuantityFormat format_ = QuantityFormat::DecimalSI;
  std::string text_;  // the parsed text when Kubernetes would keep it as the String() form
};

}  // namespace nodewarden::policy
