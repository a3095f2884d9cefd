#include "cgroups/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

namespace nodewarden::cgroups {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

bool isGoneErrno(int errnoValue) {
  return errnoValue == ENOENT || errnoValue == ENODEV || errnoValue == ESRCH;
}

bool isGone(const Error& error) {
  return isGoneErrno(error.sysErrno);
}

Error errnoError(const std::string& what, int errnoValue) {
  return Error{what + ": " + std::strerror(errnoValue), errnoValue};
}

Result<UniqueFd> openDirAt(int dirfd, const std::string& path) {
  const int fd = ::openat(dirfd, path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errnoError(path, errno);
  return UniqueFd(fd);
}

Result<UniqueFd> openFileAt(int dirfd, const std::string& name, int flags) {
  const int fd = ::openat(dirfd, name.c_str(), (flags == 0 ? O_RDONLY : flags) | O_CLOEXEC);
  if (fd < 0) return errnoError(name, errno);
  return UniqueFd(fd);
}

Result<std::size_t> preadWhole(int fd, char* buffer, std::size_t capacity) {
  std::size_t total = 0;
  // A read that returns less than asked is the end: seq_file (cgroup and /proc files) fills
  // the buffer until the file ends, so a second pread only to see 0 would double the
  // syscalls of every scan.
  while (total < capacity) {
    const ssize_t n = ::pread(fd, buffer + total, capacity - total, static_cast<off_t>(total));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errnoError("read", errno);
    }
    const std::size_t asked = capacity - total;
    total += static_cast<std::size_t>(n);
    if (n == 0 || static_cast<std::size_t>(n) < asked) return total;
  }
  return Error{"file larger than " + std::to_string(capacity) + " bytes"};
}

Result<std::string> readFileAt(int dirfd, const std::string& name) {
  auto fd = openFileAt(dirfd, name);
  if (!fd) return fd.error();
  constexpr std::size_t kMax = 16 << 20;
  std::string text;
  std::size_t capacity = 4096;
  for (;;) {
    text.resize(capacity);
    auto n = preadWhole(fd->get(), text.data(), capacity);
    if (n) {
      text.resize(*n);
      return text;
    }
    if (n.error().sysErrno != 0) return n.error().withContext(name);
    if (capacity >= kMax) return n.error().withContext(name);
    capacity *= 4;
  }
}

Result<std::string> readFile(const std::string& path) {
  return readFileAt(AT_FDCWD, path);
}

Result<void> writeFileAt(int dirfd, const std::string& name, std::string_view text) {
  auto fd = openFileAt(dirfd, name, O_WRONLY | O_TRUNC);  // a shorter value replaces a longer one
  if (!fd) return fd.error();
  const ssize_t n = ::write(fd->get(), text.data(), text.size());
  if (n < 0) return errnoError("writing " + name, errno);
  if (static_cast<std::size_t>(n) != text.size()) {
    return Error{"writing " + name + ": short write"};
  }
  return {};
}

Result<std::vector<std::string>> listSubdirectories(int dirfd) {
  // fdopendir takes ownership, so list through a duplicate and keep `dirfd` usable.
  const int dup = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return errnoError("listing", errno);
  DIR* dir = ::fdopendir(dup);
  if (dir == nullptr) {
    const int saved = errno;
    ::close(dup);
    return errnoError("listing", saved);
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_type != DT_DIR && entry->d_type != DT_UNKNOWN) continue;
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (entry->d_type == DT_UNKNOWN) {
      struct stat st {};
      if (::fstatat(dirfd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
        continue;
      }
    }
    names.emplace_back(name);
  }
  const int saved = errno;
  ::closedir(dir);
  if (saved != 0) return errnoError("listing", saved);
  return names;
}

}  // namespace nodewarden::cgroups
