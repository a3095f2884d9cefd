// Policy files, snapshots and Pod objects read from disk, with errors that name the file.
// Built as its own library (nwpolicy_files): the decision core itself does no I/O.
#pragma once

#include <string>

#include "base/result.h"
#include "policy/eviction.h"
#include "policy/model.h"
#include "policy/policy.h"

namespace nodewarden::policy {

// A policy file, validated; every error line starts with the file name. Without a path, the
// built-in defaults (the kubelet's).
Result<Policy> loadPolicy(const std::string* path);

// A snapshot file (docs/reference.md §2); every error line starts with the file name.
Result<Snapshot> loadSnapshot(const std::string& path);

// A Pod object file ("-" for standard input), resolved against the snapshot's priority
// classes; every error line starts with the file name.
Result<Pod> loadPod(const std::string& path, const Snapshot& snapshot);

}  // namespace nodewarden::policy
