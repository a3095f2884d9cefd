#include "base/files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace nodewarden {

Result<std::string> readFile(const std::string& path) {
  if (path == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    return buffer.str();
  }
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const int err = errno;
    return Error{"cannot read " + path + ": " + std::strerror(err), err};
  }
  if (S_ISDIR(info.st_mode)) return Error{"cannot read " + path + ": Is a directory"};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot read " + path + ": " + std::strerror(errno)};
  std::string text;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    text.resize(std::size_t(size));
    in.read(text.data(), size);
    text.resize(std::size_t(in.gcount()));
  } else {
    // Not seekable (a pipe, /proc): read to the end, within a bound.
    in.clear();
    constexpr std::size_t kMaxUnsizedRead = std::size_t(1) << 30;
    char buffer[1 << 16];
    while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
      text.append(buffer, std::size_t(in.gcount()));
      if (text.size() > kMaxUnsizedRead) {
        return Error{"cannot read " + path + ": larger than 1 GiB"};
      }
    }
  }
  if (in.bad()) return Error{"cannot read " + path + ": " + std::strerror(errno)};
  return text;
}

}  // namespace nodewarden
