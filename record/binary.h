// Little helpers for the binary parts of the record formats: LEB128 varints, zigzag signed
// deltas and fixed little-endian integers, written to a string and read back with every read
// bounded by the input (a reader that runs out stays failed and returns zeros).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nodewarden::record {

inline std::uint64_t zigzag(std::int64_t v) {
  return (std::uint64_t(v) << 1) ^ std::uint64_t(v >> 63);
}
inline std::int64_t unzigzag(std::uint64_t v) {
  return std::int64_t(v >> 1) ^ -std::int64_t(v & 1);
}

class ByteWriter {
 public:
  explicit ByteWriter(std::string& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(char(v)); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(char((v >> (8 * i)) & 0xff));
  }
  void u16(std::uint16_t v) {
    out_.push_back(char(v & 0xff));
    out_.push_back(char(v >> 8));
  }
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(char((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(char(v));
  }
  void svarint(std::int64_t v) { varint(zigzag(v)); }
  // The difference of two unsigned figures, as a signed delta (modulo 2^64, exact both ways).
  void delta(std::uint64_t value, std::uint64_t from) { svarint(std::int64_t(value - from)); }

 private:
  std::string& out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool atEnd() const { return pos_ >= in_.size(); }
  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return ok_ ? in_.size() - pos_ : 0; }
  void fail() { ok_ = false; }

  std::uint8_t u8() {
    if (!ok_ || pos_ + 1 > in_.size()) return failed<std::uint8_t>();
    return std::uint8_t(in_[pos_++]);
  }
  std::uint16_t u16() {
    if (!ok_ || pos_ + 2 > in_.size()) return failed<std::uint16_t>();
    std::uint16_t v = std::uint16_t(std::uint8_t(in_[pos_]) | (std::uint8_t(in_[pos_ + 1]) << 8));
    pos_ += 2;
    return v;
  }
  std::uint32_t u32() {
    if (!ok_ || pos_ + 4 > in_.size()) return failed<std::uint32_t>();
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t(std::uint8_t(in_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return v;
  }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!ok_ || pos_ >= in_.size()) return failed<std::uint64_t>();
      const std::uint8_t byte = std::uint8_t(in_[pos_++]);
      v |= std::uint64_t(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        // The tenth byte may carry one bit only.
        if (shift == 63 && byte > 1) return failed<std::uint64_t>();
        return v;
      }
    }
    return failed<std::uint64_t>();
  }
  std::int64_t svarint() { return unzigzag(varint()); }
  std::uint64_t delta(std::uint64_t from) { return from + std::uint64_t(svarint()); }
  std::string_view bytes(std::size_t n) {
    if (!ok_ || n > in_.size() - pos_) {
      ok_ = false;
      return {};
    }
    std::string_view v = in_.substr(pos_, n);
    pos_ += n;
    return v;
  }

 private:
  template <typename T>
  T failed() {
    ok_ = false;
    return T{};
  }
  std::string_view in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace nodewarden::record
