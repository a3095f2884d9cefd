// Helpers for the e2e tests that run nodewarden against the fake API server
// (tests/kube/fake_apiserver.h): a kubeconfig as kubectl writes it, Node and Pod objects.
#pragma once

#include <string>

#include "tests/e2e/e2e_env.h"
#include "tests/kube/fake_apiserver.h"
#include "tests/support/admission_review.h"

namespace nodewarden::e2e {

using nodewarden::testing::FakeApiServer;
using nodewarden::testing::FakeApiServerOptions;
using nodewarden::testing::RecordedRequest;

inline std::string base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned n = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
  }
  if (i + 1 == bytes.size()) {
    const unsigned n = static_cast<unsigned char>(bytes[i]) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const unsigned n = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

// A kubeconfig as kubectl writes it.
inline std::string kubeconfigFor(const FakeApiServer& server, const std::string& caPem,
                                 const std::string& token) {
  std::string cluster = "    server: " + server.url() + "\n";
  if (!caPem.empty()) cluster += "    certificate-authority-data: " + base64(caPem) + "\n";
  return "apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- cluster:\n" +
         cluster +
         "  name: e2e\n"
         "contexts:\n"
         "- context:\n"
         "    cluster: e2e\n"
         "    user: nodewarden\n"
         "  name: e2e\n"
         "current-context: e2e\n"
         "preferences: {}\n"
         "users:\n"
         "- name: nodewarden\n"
         "  user:\n"
         "    token: " +
         token + "\n";
}

inline Json nodeObject(const std::string& name, const std::string& memory) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"status",
           {{"capacity", {{"cpu", "2"}, {"memory", memory}, {"pods", "110"}}},
            {"allocatable", {{"cpu", "2"}, {"memory", memory}, {"pods", "110"}}},
            {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}},
                                        {{"type", "MemoryPressure"}, {"status", "False"}}})}}}};
}

inline Json apiPod(const PodSpec& spec, const std::string& node) {
  Json pod = podObject(spec);
  pod["spec"]["nodeName"] = node;
  return pod;
}

// An admission.k8s.io/v1 AdmissionReview of the scheduler binding `pod` to `node`.
inline std::string bindingReview(const std::string& uid, const PodSpec& pod,
                                 const std::string& node, bool dryRun = false) {
  return testing::bindingReview(uid, pod.ns, pod.name, node, pod.uid, dryRun).dump();
}

}  // namespace nodewarden::e2e
