#include "base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace nodewarden {

namespace {

Error systemError(const std::string& what, const std::string& path) {
  const int err = errno;
  return Error{what + " " + path + ": " + std::strerror(err), err};
}

}  // namespace

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

Result<void> writeFileAtomically(const std::string& path, const std::string& text) {
  std::error_code ec;
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return systemError("cannot create", temporary);
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Error error = systemError("cannot write", temporary);
      ::close(fd);
      ::unlink(temporary.c_str());
      return error;
    }
    written += std::size_t(n);
  }
  if (::fsync(fd) != 0) {
    Error error = systemError("cannot sync", temporary);
    ::close(fd);
    ::unlink(temporary.c_str());
    return error;
  }
  ::close(fd);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    Error error = systemError("cannot rename onto", path);
    ::unlink(temporary.c_str());
    return error;
  }
  return {};
}

Result<std::string> readTrimmedFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return Error{path + ": " + std::strerror(err != 0 ? err : ENOENT), err};
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return Error{path + ": read error"};
  std::string text = out.str();
  while (!text.empty() &&
         (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.pop_back();
  return text;
}

FileStamp FileStamp::of(const struct stat& st) {
  return FileStamp{
      static_cast<std::uint64_t>(st.st_ino), static_cast<std::int64_t>(st.st_size),
      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

}  // namespace nodewarden
