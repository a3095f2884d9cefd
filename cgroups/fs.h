// The thin I/O layer of cgroups/: owned file descriptors and reads relative to a directory
// fd. Every function returns an Error carrying the errno text; ENOENT/ENODEV on a cgroup
// that vanished is reported as such (`Error::message` starts with the file name) and callers
// treat it as a normal event (see `isGone`).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace nodewarden::cgroups {

// An owned file descriptor, closed on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// True when `errnoValue` means the cgroup (or process) no longer exists: ENOENT, ENODEV,
// ESRCH. Readers of a cgroup that was removed mid-scan see these.
bool isGoneErrno(int errnoValue);

// Opens a directory (O_RDONLY|O_DIRECTORY|O_CLOEXEC) to list it and openat below it.
// `dirfd` may be AT_FDCWD.
Result<UniqueFd> openDirAt(int dirfd, const std::string& path);
// Opens a file for reading (O_RDONLY|O_CLOEXEC) relative to `dirfd`.
Result<UniqueFd> openFileAt(int dirfd, const std::string& name, int flags = 0);

// Reads up to `capacity` bytes from offset 0 with pread. Returns the bytes read. A read that
// fills the buffer completely is an error ("file larger than N bytes"), so a truncated file
// is never parsed as if whole.
Result<std::size_t> preadWhole(int fd, char* buffer, std::size_t capacity);

// openat + read-all + close; for files read once (no size limit beyond 16 MiB).
Result<std::string> readFileAt(int dirfd, const std::string& name);
// readFileAt(AT_FDCWD, path).
Result<std::string> readFile(const std::string& path);

// Writes `text` to `name` under `dirfd` in one write(2) (cgroup control files need that).
Result<void> writeFileAt(int dirfd, const std::string& name, std::string_view text);

// A failed system call as an Error: "<what>: <strerror>", with Error::sysErrno set.
Error errnoError(const std::string& what, int errnoValue);

// True when the error came from a vanished cgroup or process (Error::sysErrno, isGoneErrno).
bool isGone(const Error& error);

// Lists the names of subdirectories of `dirfd` (not "." or ".."), unsorted.
Result<std::vector<std::string>> listSubdirectories(int dirfd);

}  // namespace nodewarden::cgroups
