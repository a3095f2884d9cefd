// Reading a file named on a command line, with errors that name it.
#pragma once

#include <cstdint>
#include <string>

struct stat;

#include "base/result.h"

namespace nodewarden {

// The whole file, or standard input for "-". The error names the file and the OS reason;
// a directory, or an unsized file (a pipe) over 1 GiB, is an error.
Result<std::string> readFile(const std::string& path);

// The text of a small file an operator or the kubelet writes (a token, a namespace), without
// its trailing newline and blanks. The error is "PATH: reason".
Result<std::string> readTrimmedFile(const std::string& path);

// A file's identity as a change detector sees it: inode, size and modification time. Equal
// stamps mean "unchanged": an editor that replaces the file changes the inode, one that
// rewrites it in place changes the size or the mtime.
struct FileStamp {
  std::uint64_t inode = 0;
  std::int64_t size = -1;
  std::int64_t mtimeNanos = 0;

  static FileStamp of(const struct stat& st);
  bool operator==(const FileStamp&) const = default;
};

// Writes `text` to `path` so that a reader sees the old file or the new one, never a part:
// `path`.tmp is written, synced and renamed over `path` (mode 0600; the directory is created
// if missing). A failure (a full disk) leaves the old file as it was.
Result<void> writeFileAtomically(const std::string& path, const std::string& text);

}  // namespace nodewarden
