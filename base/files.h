// Reading a file named on a command line, with errors that name it.
#pragma once

#include <string>

#include "base/result.h"

namespace nodewarden {

// The whole file, or standard input for "-". The error names the file and the OS reason;
// a directory, or an unsized file (a pipe) over 1 GiB, is an error.
Result<std::string> readFile(const std::string& path);

}  // namespace nodewarden
