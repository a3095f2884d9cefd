// An admission.k8s.io/v1 AdmissionReview of the scheduler binding a pod to a node, as the API
// server sends it to the pods/binding webhook — for the webhook's tests, the e2e tests and
// bench_kube alike.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace nodewarden::testing {

// `bindingUid`: the Binding object's metadata.uid (left out when empty).
inline nlohmann::json bindingReview(const std::string& uid, const std::string& ns,
                                    const std::string& name, const std::string& node,
                                    const std::string& bindingUid = "", bool dryRun = false) {
  nlohmann::json metadata = {{"name", name}, {"namespace", ns}};
  if (!bindingUid.empty()) metadata["uid"] = bindingUid;
  return nlohmann::json{
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", uid},
        {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Binding"}}},
        {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
        {"subResource", "binding"},
        {"requestKind", {{"group", ""}, {"version", "v1"}, {"kind", "Binding"}}},
        {"requestResource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
        {"requestSubResource", "binding"},
        {"name", name},
        {"namespace", ns},
        {"operation", "CREATE"},
        {"userInfo", {{"username", "system:kube-scheduler"}}},
        {"object",
         {{"apiVersion", "v1"},
          {"kind", "Binding"},
          {"metadata", metadata},
          {"target", {{"kind", "Node"}, {"name", node}}}}},
        {"oldObject", nullptr},
        {"dryRun", dryRun},
        {"options", {{"apiVersion", "meta.k8s.io/v1"}, {"kind", "CreateOptions"}}}}}};
}

}  // namespace nodewarden::testing
