#include "kube/config.h"
#include "kube/utf8.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "policy/json_reader.h"

namespace nodewarden::kube {

namespace {

using policy::Json;

std::string trimTrailingSpace(std::string s) {
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  return s;
}

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int e = errno;
    return Error{path + ": " + std::strerror(e != 0 ? e : ENOENT), e};
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return Error{path + ": read error"};
  return out.str();
}

std::string hostForUrl(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

std::string serverUrl(const ClusterConfig& c) {
  return std::string(c.tls ? "https://" : "http://") + hostForUrl(c.host) + ":" + c.port +
         c.basePath;
}

// ---------------------------------------------------------------------------------------
// A strict reader for the YAML kubectl writes for kubeconfigs (go-yaml's block style):
// block mappings and sequences, plain and quoted scalars, comments, `{}` and `[]`. Anything
// else (anchors, tags, block scalars, flow collections with content, multi-line scalars,
// several documents, tabs in indentation) is an error naming the line.

struct YamlLine {
  std::size_t indent;
  std::string_view content;  // after the indentation, not empty, not a comment
  std::size_t number;        // 1-based
};

struct YamlError {
  std::size_t line;
  std::string message;
};

class YamlReader {
 public:
  explicit YamlReader(std::string_view text) : text_(text) {}

  Result<Json> read() {
    if (auto e = split(); e) return fail(*e);
    Json root = Json::object();
    if (lines_.empty()) return root;
    if (lines_[0].indent != 0) return fail({lines_[0].number, "unexpected indentation"});
    auto value = block(0);
    if (!value) return fail(*error_);
    if (pos_ < lines_.size()) {
      return fail({lines_[pos_].number,
                   lines_[pos_].indent == 0 ? "unexpected content" : "unexpected indentation"});
    }
    return std::move(*value);
  }

 private:
  Error fail(const YamlError& e) {
    return Error{"line " + std::to_string(e.line) + ": " + e.message};
  }

  std::optional<YamlError> split() {
    std::size_t number = 0;
    std::size_t start = 0;
    bool started = false;
    while (start <= text_.size()) {
      std::size_t end = text_.find('\n', start);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view raw = text_.substr(start, end - start);
      ++number;
      start = end + 1;
      if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
      std::size_t indent = 0;
      while (indent < raw.size() && (raw[indent] == ' ' || raw[indent] == '\t')) {
        if (raw[indent] == '\t') {
          // A tab is only harmless on an otherwise empty line.
          if (raw.find_first_not_of(" \t") != std::string_view::npos)
            return YamlError{number, "tabs are not allowed for indentation"};
        }
        ++indent;
      }
      std::string_view content = raw.substr(indent);
      if (content.empty() || content[0] == '#') {
        if (end == text_.size()) break;
        continue;
      }
      if (indent == 0 && (content.substr(0, 3) == "---" || content.substr(0, 3) == "...") &&
          (content.size() == 3 || content[3] == ' ')) {
        if (!started && content.substr(0, 3) == "---") {
          started = true;
          std::string_view rest = content.substr(3);
          auto at = rest.find_first_not_of(' ');
          if (at != std::string_view::npos && rest[at] != '#')
            return YamlError{number, "content after the document start is not supported"};
          if (end == text_.size()) break;
          continue;
        }
        return YamlError{number, "multiple YAML documents are not supported"};
      }
      if (content[0] == '%') return YamlError{number, "YAML directives are not supported"};
      started = true;
      // Trailing spaces never matter in the block style.
      while (!content.empty() && (content.back() == ' ' || content.back() == '\t'))
        content.remove_suffix(1);
      lines_.push_back(YamlLine{indent, content, number});
      if (end == text_.size()) break;
    }
    return std::nullopt;
  }

  static bool isSequenceItem(std::string_view content) {
    return content[0] == '-' && (content.size() == 1 || content[1] == ' ');
  }

  // The node whose first line is lines_[pos_], indented by `indent`.
  std::optional<Json> block(std::size_t indent) {
    if (isSequenceItem(lines_[pos_].content)) return sequence(indent);
    return mapping(indent);
  }

  std::optional<Json> sequence(std::size_t indent) {
    Json out = Json::array();
    while (pos_ < lines_.size() && lines_[pos_].indent == indent &&
           isSequenceItem(lines_[pos_].content)) {
      YamlLine& line = lines_[pos_];
      std::string_view rest = line.content.substr(1);
      std::size_t spaces = 0;
      while (spaces < rest.size() && rest[spaces] == ' ') ++spaces;
      rest.remove_prefix(spaces);
      if (rest.empty() || rest[0] == '#') {
        ++pos_;
        if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
          auto item = block(lines_[pos_].indent);
          if (!item) return std::nullopt;
          out.push_back(std::move(*item));
        } else {
          out.push_back(nullptr);
        }
        continue;
      }
      bool nested = isSequenceItem(rest);
      if (!nested) {
        auto key = mappingKey(rest, line.number);
        if (error_) return std::nullopt;
        nested = key.has_value();
      }
      if (nested) {
        // "- name: x": a mapping (or sequence) whose column is that of "name".
        line.indent = indent + 1 + spaces;
        line.content = rest;
        auto item = block(line.indent);
        if (!item) return std::nullopt;
        out.push_back(std::move(*item));
        continue;
      }
      auto value = scalar(rest, line.number);
      if (!value) return std::nullopt;
      out.push_back(std::move(*value));
      ++pos_;
      if (pos_ < lines_.size() && lines_[pos_].indent > indent)
        return error(lines_[pos_].number, "multi-line scalars are not supported");
    }
    if (pos_ < lines_.size() && lines_[pos_].indent > indent)
      return error(lines_[pos_].number, "unexpected indentation");
    return out;
  }

  std::optional<Json> mapping(std::size_t indent) {
    Json out = Json::object();
    while (pos_ < lines_.size() && lines_[pos_].indent == indent) {
      const YamlLine& line = lines_[pos_];
      if (isSequenceItem(line.content)) return error(line.number, "unexpected sequence item");
      auto key = mappingKey(line.content, line.number);
      if (error_) return std::nullopt;
      if (!key) return error(line.number, "expected \"key: value\"");
      if (out.contains(key->first))
        return error(line.number, "duplicate key \"" + key->first + "\"");
      std::string_view rest = line.content.substr(key->second);
      std::size_t number = line.number;
      ++pos_;
      Json value;
      if (rest.empty() || rest[0] == '#') {
        if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
          auto nested = block(lines_[pos_].indent);
          if (!nested) return std::nullopt;
          value = std::move(*nested);
        } else if (pos_ < lines_.size() && lines_[pos_].indent == indent &&
                   isSequenceItem(lines_[pos_].content)) {
          // go-yaml writes a mapping's sequence at the key's own column.
          auto nested = sequence(indent);
          if (!nested) return std::nullopt;
          value = std::move(*nested);
        }
      } else {
        auto parsed = scalar(rest, number);
        if (!parsed) return std::nullopt;
        value = std::move(*parsed);
        if (pos_ < lines_.size() && lines_[pos_].indent > indent)
          return error(lines_[pos_].number, "multi-line scalars are not supported");
      }
      out[key->first] = std::move(value);
    }
    if (pos_ < lines_.size() && lines_[pos_].indent > indent)
      return error(lines_[pos_].number, "unexpected indentation");
    return out;
  }

  // "key: rest" → the key and the offset of rest (past the spaces); nullopt when the line is
  // not a mapping entry.
  std::optional<std::pair<std::string, std::size_t>> mappingKey(std::string_view s,
                                                                std::size_t number) {
    std::string key;
    std::size_t after = 0;
    if (s[0] == '"' || s[0] == '\'') {
      std::size_t end = 0;
      auto quoted = quotedScalar(s, number, end);
      if (!quoted) return std::nullopt;
      std::size_t at = end;
      while (at < s.size() && s[at] == ' ') ++at;
      if (at >= s.size() || s[at] != ':' || (at + 1 < s.size() && s[at + 1] != ' '))
        return std::nullopt;
      key = std::move(*quoted);
      after = at + 1;
    } else {
      std::size_t at = 0;
      for (;; ++at) {
        at = s.find(':', at);
        if (at == std::string_view::npos) return std::nullopt;
        if (at + 1 == s.size() || s[at + 1] == ' ') break;
      }
      std::size_t comment = s.find(" #");
      if (comment != std::string_view::npos && comment < at) return std::nullopt;
      std::string_view k = s.substr(0, at);
      while (!k.empty() && k.back() == ' ') k.remove_suffix(1);
      if (k.empty()) {
        error(number, "empty mapping key");
        return std::nullopt;
      }
      if (std::string_view("[]{}&*!|>%@`?,").find(k[0]) != std::string_view::npos) {
        error(number, std::string("unsupported YAML syntax at \"") + k[0] + "\"");
        return std::nullopt;
      }
      key = std::string(k);
      after = at + 1;
    }
    while (after < s.size() && s[after] == ' ') ++after;
    return std::make_pair(std::move(key), after);
  }

  std::optional<std::string> quotedScalar(std::string_view s, std::size_t number,
                                          std::size_t& end) {
    std::string out;
    char quote = s[0];
    for (std::size_t i = 1; i < s.size(); ++i) {
      char c = s[i];
      if (quote == '\'') {
        if (c == '\'') {
          if (i + 1 < s.size() && s[i + 1] == '\'') {
            out += '\'';
            ++i;
            continue;
          }
          end = i + 1;
          return out;
        }
        out += c;
        continue;
      }
      if (c == '"') {
        end = i + 1;
        return out;
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (++i >= s.size()) break;
      switch (s[i]) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '0':
          out += '\0';
          break;
        case ' ':
          out += ' ';
          break;
        case 'x':
        case 'u':
        case 'U': {
          std::size_t digits = s[i] == 'x' ? 2 : s[i] == 'u' ? 4 : 8;
          if (i + digits >= s.size()) {
            error(number, "bad escape in a double-quoted scalar");
            return std::nullopt;
          }
          std::uint32_t cp = 0;
          for (std::size_t d = 1; d <= digits; ++d) {
            char h = s[i + d];
            cp <<= 4;
            if (h >= '0' && h <= '9')
              cp |= static_cast<std::uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f')
              cp |= static_cast<std::uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
              cp |= static_cast<std::uint32_t>(h - 'A' + 10);
            else {
              error(number, "bad escape in a double-quoted scalar");
              return std::nullopt;
            }
          }
          i += digits;
          appendUtf8(out, cp);
          break;
        }
        default:
          error(number, std::string("unknown escape \\") + s[i] + " in a double-quoted scalar");
          return std::nullopt;
      }
    }
    error(number, "multi-line quoted scalars are not supported");
    return std::nullopt;
  }


  static bool onlyComment(std::string_view rest) {
    std::size_t at = rest.find_first_not_of(' ');
    return at == std::string_view::npos || (at > 0 && rest[at] == '#');
  }

  std::optional<Json> scalar(std::string_view s, std::size_t number) {
    char c = s[0];
    if (c == '"' || c == '\'') {
      std::size_t end = 0;
      auto value = quotedScalar(s, number, end);
      if (!value) return std::nullopt;
      if (!onlyComment(s.substr(end)))
        return error(number, "unexpected text after a quoted scalar");
      return Json(std::move(*value));
    }
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      std::size_t at = s.find_first_not_of(' ', 1);
      if (at == std::string_view::npos || s[at] != close || !onlyComment(s.substr(at + 1)))
        return error(number, "flow collections are not supported (only {} and [])");
      return c == '{' ? Json::object() : Json::array();
    }
    if (c == '&' || c == '*') return error(number, "anchors and aliases are not supported");
    if (c == '!') return error(number, "tags are not supported");
    if (c == '|' || c == '>') return error(number, "block scalars are not supported");
    if (c == '%' || c == '@' || c == '`' || c == '}' || c == ']' || c == ',' || c == '?')
      return error(number, std::string("unsupported YAML syntax at \"") + c + "\"");
    std::size_t comment = s.find(" #");
    std::string_view plain = s.substr(0, comment);
    while (!plain.empty() && plain.back() == ' ') plain.remove_suffix(1);
    if (plain.find(": ") != std::string_view::npos || plain.back() == ':')
      return error(number, "mapping values are not allowed here");
    std::string v(plain);
    if (v == "true" || v == "True" || v == "TRUE") return Json(true);
    if (v == "false" || v == "False" || v == "FALSE") return Json(false);
    if (v == "null" || v == "Null" || v == "NULL" || v == "~") return Json(nullptr);
    return Json(std::move(v));
  }

  std::nullopt_t error(std::size_t line, std::string message) {
    if (!error_) error_ = YamlError{line, std::move(message)};
    return std::nullopt;
  }

  std::string_view text_;
  std::vector<YamlLine> lines_;
  std::size_t pos_ = 0;
  std::optional<YamlError> error_;
};

// ---------------------------------------------------------------------------------------

int base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Go's base64.StdEncoding, as kubeconfig []byte fields use: padded, line breaks ignored.
Result<std::string> decodeBase64(std::string_view in) {
  std::string out;
  out.reserve(in.size() / 4 * 3);
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t count = 0;  // significant characters, padding included
  std::size_t padding = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '\n' || c == '\r') continue;
    if (c == '=') {
      ++padding;
      ++count;
      continue;
    }
    int v = base64Value(c);
    if (v < 0 || padding > 0) return Error{"invalid base64 at offset " + std::to_string(i)};
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    ++count;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  if (count % 4 != 0 || padding > 2) return Error{"invalid base64: truncated or bad padding"};
  return out;
}

// ---------------------------------------------------------------------------------------

struct Named {
  const Json* value = nullptr;  // the "cluster" / "context" / "user" member
  std::string path;             // "clusters[0].cluster"
};

Result<Named> findNamed(const Json& root, const char* list, const char* member,
                        const std::string& name) {
  auto it = root.find(list);
  if (it == root.end() || it->is_null()) return Named{};
  if (!it->is_array()) return Error{std::string(list) + ": expected a list"};
  for (std::size_t i = 0; i < it->size(); ++i) {
    const Json& entry = (*it)[i];
    std::string path = std::string(list) + "[" + std::to_string(i) + "]";
    if (!entry.is_object()) return Error{path + ": expected a mapping"};
    auto n = entry.find("name");
    if (n == entry.end() || !n->is_string() || n->get<std::string>() != name) continue;
    auto m = entry.find(member);
    std::string memberPath = path + "." + member;
    if (m == entry.end() || m->is_null()) {
      static const Json kEmpty = Json::object();
      return Named{&kEmpty, memberPath};
    }
    if (!m->is_object()) return Error{memberPath + ": expected a mapping"};
    return Named{&*m, memberPath};
  }
  return Named{};  // not found
}

Result<std::string> optString(const Named& n, const char* key) {
  auto it = n.value->find(key);
  if (it == n.value->end() || it->is_null()) return std::string();
  if (!it->is_string()) return Error{n.path + "." + key + ": expected a string"};
  return it->get<std::string>();
}

Result<bool> optBool(const Named& n, const char* key) {
  auto it = n.value->find(key);
  if (it == n.value->end() || it->is_null()) return false;
  if (it->is_boolean()) return it->get<bool>();
  return Error{n.path + "." + key + ": expected true or false"};
}

std::string resolveAgainst(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return dir + "/" + path;
}

// "https://host:port/prefix" into the config.
std::optional<std::string> parseServer(const std::string& url, ClusterConfig& c) {
  std::string_view s(url);
  if (s.substr(0, 8) == "https://") {
    c.tls = true;
    s.remove_prefix(8);
  } else if (s.substr(0, 7) == "http://") {
    c.tls = false;
    s.remove_prefix(7);
  } else {
    return "expected an https:// or http:// URL, got \"" + url + "\"";
  }
  std::size_t slash = s.find_first_of("/?#");
  std::string_view authority = s.substr(0, slash);
  std::string_view rest = slash == std::string_view::npos ? std::string_view() : s.substr(slash);
  if (authority.find('@') != std::string_view::npos)
    return "user information in the server URL is not supported";
  if (!rest.empty() && rest[0] != '/')
    return "a query or fragment in the server URL is not supported";
  if (rest.find_first_of("?#") != std::string_view::npos)
    return "a query or fragment in the server URL is not supported";
  std::string_view port;
  if (!authority.empty() && authority[0] == '[') {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return "unterminated [ in the server URL";
    c.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return "unexpected text after ] in the server URL";
      port = after.substr(1);
      if (port.empty()) return "empty port in the server URL";
    }
  } else {
    std::size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      if (authority.find(':') != colon)
        return "an IPv6 address in a URL must be in brackets ([::1]:6443)";
      port = authority.substr(colon + 1);
      if (port.empty()) return "empty port in the server URL";
      authority = authority.substr(0, colon);
    }
    c.host = std::string(authority);
  }
  if (c.host.empty()) return "no host in the server URL";
  if (port.empty()) {
    c.port = c.tls ? "443" : "80";
  } else {
    unsigned value = 0;
    for (char ch : port) {
      if (ch < '0' || ch > '9') return "bad port in the server URL";
      value = value * 10 + static_cast<unsigned>(ch - '0');
      if (value > 65535) return "bad port in the server URL";
    }
    if (value == 0) return "bad port in the server URL";
    c.port = std::string(port);
  }
  std::string base(rest);
  while (!base.empty() && base.back() == '/') base.pop_back();
  c.basePath = base;
  return std::nullopt;
}

Result<ClusterConfig> interpretKubeconfig(const Json& root, const std::string& path,
                                          const std::optional<std::string>& context) {
  if (!root.is_object()) return Error{"expected a mapping at the top"};
  std::string contextName;
  std::string contextSource;
  if (context) {
    contextName = *context;
    contextSource = "context \"" + contextName + "\"";
  } else {
    auto cc = root.find("current-context");
    if (cc != root.end() && cc->is_string())
      contextName = cc->get<std::string>();
    else if (cc != root.end() && !cc->is_null())
      return Error{"current-context: expected a string"};
    if (contextName.empty()) return Error{"current-context is not set (and no context given)"};
    contextSource = "current-context \"" + contextName + "\"";
  }
  auto ctx = findNamed(root, "contexts", "context", contextName);
  if (!ctx) return ctx.error();
  if (ctx->value == nullptr) return Error{contextSource + ": no such context in contexts"};

  ClusterConfig c;
  auto clusterName = optString(*ctx, "cluster");
  if (!clusterName) return clusterName.error();
  auto userName = optString(*ctx, "user");
  if (!userName) return userName.error();
  auto ns = optString(*ctx, "namespace");
  if (!ns) return ns.error();
  c.namespaceName = ns->empty() ? "default" : *ns;
  if (clusterName->empty()) return Error{ctx->path + ".cluster: not set"};

  std::string dir = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos)
    dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  if (dir == "/") dir = "";

  auto cluster = findNamed(root, "clusters", "cluster", *clusterName);
  if (!cluster) return cluster.error();
  if (cluster->value == nullptr)
    return Error{ctx->path + ".cluster: cluster \"" + *clusterName + "\" is not in clusters"};
  auto server = optString(*cluster, "server");
  if (!server) return server.error();
  if (server->empty()) return Error{cluster->path + ".server: not set"};
  if (auto problem = parseServer(*server, c)) return Error{cluster->path + ".server: " + *problem};
  auto caFile = optString(*cluster, "certificate-authority");
  if (!caFile) return caFile.error();
  auto caData = optString(*cluster, "certificate-authority-data");
  if (!caData) return caData.error();
  if (!caFile->empty() && !caData->empty())
    return Error{cluster->path +
                 ": certificate-authority and certificate-authority-data are both set"};
  if (!caData->empty()) {
    auto decoded = decodeBase64(*caData);
    if (!decoded) return decoded.error().withContext(cluster->path + ".certificate-authority-data");
    c.caData = std::move(*decoded);
  }
  c.caFile = resolveAgainst(dir, *caFile);
  auto insecure = optBool(*cluster, "insecure-skip-tls-verify");
  if (!insecure) return insecure.error();
  c.insecureSkipTlsVerify = *insecure;
  if (c.insecureSkipTlsVerify && (!c.caData.empty() || !c.caFile.empty()))
    return Error{cluster->path +
                 ": insecure-skip-tls-verify with a certificate authority is not allowed"};
  auto serverName = optString(*cluster, "tls-server-name");
  if (!serverName) return serverName.error();
  c.tlsServerName = *serverName;
  if (cluster->value->contains("proxy-url"))
    return Error{cluster->path + ".proxy-url: proxies are not supported"};

  if (!userName->empty()) {
    auto user = findNamed(root, "users", "user", *userName);
    if (!user) return user.error();
    if (user->value == nullptr)
      return Error{ctx->path + ".user: user \"" + *userName + "\" is not in users"};
    if (user->value->contains("exec"))
      return Error{user->path + ".exec: exec credential plugins are not supported"};
    if (user->value->contains("auth-provider"))
      return Error{user->path + ".auth-provider: auth-provider plugins are not supported"};
    if (user->value->contains("username") || user->value->contains("password"))
      return Error{user->path + ": basic authentication (username/password) is not supported"};
    auto token = optString(*user, "token");
    if (!token) return token.error();
    c.token = *token;
    auto tokenFile = optString(*user, "tokenFile");
    if (!tokenFile) return tokenFile.error();
    c.tokenFile = resolveAgainst(dir, *tokenFile);
    struct Pair {
      const char* file;
      const char* data;
      std::string* fileOut;
      std::string* dataOut;
    };
    for (const Pair& p :
         {Pair{"client-certificate", "client-certificate-data", &c.clientCertFile,
               &c.clientCertData},
          Pair{"client-key", "client-key-data", &c.clientKeyFile, &c.clientKeyData}}) {
      auto file = optString(*user, p.file);
      if (!file) return file.error();
      auto data = optString(*user, p.data);
      if (!data) return data.error();
      if (!file->empty() && !data->empty())
        return Error{user->path + ": " + p.file + " and " + p.data + " are both set"};
      if (!data->empty()) {
        auto decoded = decodeBase64(*data);
        if (!decoded) return decoded.error().withContext(user->path + "." + p.data);
        *p.dataOut = std::move(*decoded);
      }
      *p.fileOut = resolveAgainst(dir, *file);
    }
    bool hasCert = !c.clientCertData.empty() || !c.clientCertFile.empty();
    bool hasKey = !c.clientKeyData.empty() || !c.clientKeyFile.empty();
    if (hasCert != hasKey)
      return Error{user->path + ": a client certificate needs both the certificate and its key"};
  }
  c.description = "kubeconfig " + path + ", context " + contextName + " (" + serverUrl(c) + ")";
  return c;
}

}  // namespace

Result<ClusterConfig> inClusterConfig(const std::string& serviceAccountDir,
                                      const std::function<const char*(const char*)>& getEnv) {
  auto env = [&](const char* name) -> std::string {
    const char* v = getEnv ? getEnv(name) : std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  std::string host = env("KUBERNETES_SERVICE_HOST");
  std::string port = env("KUBERNETES_SERVICE_PORT");
  if (host.empty()) return Error{"not running in a cluster: KUBERNETES_SERVICE_HOST is not set"};
  if (port.empty()) return Error{"not running in a cluster: KUBERNETES_SERVICE_PORT is not set"};
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  ClusterConfig c;
  c.host = host;
  c.port = port;
  c.tls = true;
  c.tokenFile = serviceAccountDir + "/token";
  c.caFile = serviceAccountDir + "/ca.crt";
  auto token = readFile(c.tokenFile);
  if (!token) return token.error().withContext("in-cluster service account");
  if (trimTrailingSpace(*token).empty())
    return Error{"in-cluster service account: " + c.tokenFile + " is empty"};
  struct stat st {};
  if (::stat(c.caFile.c_str(), &st) != 0) {
    int e = errno;
    return Error{"in-cluster service account: " + c.caFile + ": " + std::strerror(e), e};
  }
  auto ns = readFile(serviceAccountDir + "/namespace");
  c.namespaceName = ns ? trimTrailingSpace(*ns) : std::string();
  if (c.namespaceName.empty()) c.namespaceName = "default";
  c.description = "in-cluster service account (" + serverUrl(c) + ")";
  return c;
}

Result<ClusterConfig> loadKubeconfig(const std::string& path,
                                     const std::optional<std::string>& context) {
  std::string label = "kubeconfig " + path;
  auto text = readFile(path);
  if (!text) {
    int e = text.error().sysErrno != 0 ? text.error().sysErrno : EIO;
    return Error{label + ": " + std::strerror(e), e};
  }
  Json root;
  std::size_t first = text->find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (*text)[first] == '{') {
    policy::Diagnostics diagnostics;
    auto parsed = policy::parseJsonText(*text, diagnostics);
    if (!parsed) return Error{label + ": " + diagnostics.joined()};
    root = std::move(*parsed);
  } else {
    auto parsed = YamlReader(*text).read();
    if (!parsed) return parsed.error().withContext(label);
    root = std::move(*parsed);
  }
  auto config = interpretKubeconfig(root, path, context);
  if (!config) return config.error().withContext(label);
  return config;
}

Result<ClusterConfig> resolveClusterConfig(const std::optional<std::string>& kubeconfigFlag) {
  if (kubeconfigFlag && !kubeconfigFlag->empty()) return loadKubeconfig(*kubeconfigFlag);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr) {
    std::string_view list(env);
    while (!list.empty()) {
      std::size_t colon = list.find(':');
      std::string_view first = list.substr(0, colon);
      if (!first.empty()) return loadKubeconfig(std::string(first));
      if (colon == std::string_view::npos) break;
      list.remove_prefix(colon + 1);
    }
  }
  return inClusterConfig();
}

TokenSource::TokenSource(const ClusterConfig& config)
    : fixed_(config.token), file_(config.tokenFile), token_(config.token) {}

const std::string& TokenSource::token() {
  if (file_.empty()) return token_;
  auto now = std::chrono::steady_clock::now();
  if (!force_ && now - lastCheck_ < std::chrono::seconds(1)) return token_;
  lastCheck_ = now;
  bool forced = force_;
  force_ = false;
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) {
    int e = errno;
    problem_ = "token file " + file_ + ": " + std::strerror(e);
    return token_;
  }
  std::int64_t mtime =
      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (!forced && problem_.empty() && static_cast<std::uint64_t>(st.st_ino) == inode_ &&
      static_cast<std::int64_t>(st.st_size) == size_ && mtime == mtimeNanos_)
    return token_;
  auto text = readFile(file_);
  if (!text) {
    problem_ = "token file " + text.error().message;
    return token_;
  }
  std::string fresh = trimTrailingSpace(std::move(*text));
  if (fresh.empty()) {
    problem_ = "token file " + file_ + " is empty";
    return token_;
  }
  token_ = std::move(fresh);
  problem_.clear();
  inode_ = static_cast<std::uint64_t>(st.st_ino);
  size_ = static_cast<std::int64_t>(st.st_size);
  mtimeNanos_ = mtime;
  return token_;
}

void TokenSource::invalidate() {
  force_ = true;
}

}  // namespace nodewarden::kube
