// Reading a file named on a command line, with errors that name it.
#pragma once

#include <string>

#include "base/result.h"

namespace nodewarden {

// The whole file, or standard input for "-". The error names the file and the OS reason;
// a directory, or an unsized file (a pipe) over 1 GiB, is an error.
Result<std::string> readFile(const std::string& path);

// Writes `text` to `path` so that a reader sees the old file or the new one, never a part:
// `path`.tmp is written, synced and renamed over `path` (mode 0600; the directory is created
// if missing). A failure (a full disk) leaves the old file as it was.
Result<void> writeFileAtomically(const std::string& path, const std::string& text);

}  // namespace nodewarden
