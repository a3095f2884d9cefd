// Reading the files named on the command line, with errors that name them.
#pragma once

#include <string>

#include "policy/eviction.h"
#include "policy/model.h"
#include "policy/policy.h"
#include "policy/result.h"

namespace nodewarden::agent {

// The whole file, or standard input for "-". The error names the file and the OS reason.
Result<std::string> readFile(const std::string& path);

// A policy file, validated; every error line starts with the file name. Without a path, the
// built-in defaults (the kubelet's).
Result<policy::Policy> loadPolicy(const std::string* path);

// A snapshot file (CONTRACT §2); every error line starts with the file name.
Result<policy::Snapshot> loadSnapshot(const std::string& path);

// A Pod object file ("-" for standard input), resolved against the snapshot's priority
// classes; every error line starts with the file name.
Result<policy::Pod> loadPod(const std::string& path, const policy::Snapshot& snapshot);

}  // namespace nodewarden::agent
