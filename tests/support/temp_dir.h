// A temporary directory for a test, removed with everything in it when the test ends (also
// when it fails). Files are written by name below it.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace nodewarden::testing {

class TempDir {
 public:
  // `prefix`: the start of the directory's name in $TMPDIR (or /tmp).
  explicit TempDir(const std::string& prefix = "nodewarden-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp " + pattern + " failed");
    }
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` to the file `name` below the directory (directories made as needed);
  // returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::filesystem::path file = path / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    return file.string();
  }

  std::filesystem::path path;
};

}  // namespace nodewarden::testing
