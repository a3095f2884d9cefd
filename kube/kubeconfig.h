// Internal to kube/ (kube/config.h is the interface): kubeconfig files decoded as kubectl
// decodes them (client-go's clientcmd/api/v1 types), and merged by its rules. Choosing and
// validating the context to use is kube/config.cpp's.
//
// Threading: pure functions of the files they read.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "policy/json_reader.h"

namespace nodewarden::kube::kubeconfig {

// Where an entry was written, for messages: "kubeconfig /x/config: users[1].user".
struct Origin {
  std::string file;
  std::string path;  // "clusters[0].cluster"
  std::string at(const std::string& member) const { return path + "." + member; }
};

struct Cluster {
  Origin origin;
  std::string server;
  std::string tlsServerName;
  bool insecureSkipTlsVerify = false;
  std::string caFile;                 // resolved against the file's directory
  std::optional<std::string> caData;  // decoded
  std::string proxyUrl;
  bool disableCompression = false;
  std::optional<policy::Json> execExtension;  // extensions[name=client.authentication.k8s.io/exec]
};

struct Exec {
  std::string command;  // resolved against the file's directory when relative with a '/'
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  bool envNameMissing = false;  // an env entry without a name (refused when used)
  std::string apiVersion;
  std::string installHint;
  bool provideClusterInfo = false;
  std::string interactiveMode;  // as written; "" when not set
};

struct User {
  Origin origin;
  std::string clientCertFile, clientKeyFile;                 // resolved
  std::optional<std::string> clientCertData, clientKeyData;  // decoded
  std::string token, tokenFile;
  std::string impersonate, impersonateUid;
  std::vector<std::string> impersonateGroups;
  std::vector<std::pair<std::string, std::vector<std::string>>> impersonateExtra;
  std::string username, password;
  std::optional<std::string> authProvider;  // its name, when the user has one
  std::optional<Exec> exec;
};

struct Context {
  Origin origin;
  std::string cluster, user, namespaceName;
};

// One file, or several merged.
struct Config {
  std::vector<std::string> files;  // the files read, in order
  std::string currentContext;
  std::map<std::string, Cluster> clusters;
  std::map<std::string, User> users;
  std::map<std::string, Context> contexts;
};

// Reads and decodes one file: YAML as kubectl's reader takes it, or JSON. Any member of a
// known field that has the wrong type, bad base64, or a name twice in one list is an error,
// used or not, as kubectl refuses it ("clusters[0].cluster.server: expected a string, got a
// number"). Unknown members are ignored. Errors carry no file name (the caller adds it); a
// file that cannot be read has its errno in the error.
Result<Config> readFile(const std::string& path);

// Merges `next` into `into`: each name, and current-context, keeps the value it already has.
void mergeInto(Config& into, Config next);

}  // namespace nodewarden::kube::kubeconfig
