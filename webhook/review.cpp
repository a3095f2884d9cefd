#include "webhook/review.h"

#include <optional>
#include <utility>

#include "policy/json_reader.h"

namespace nodewarden::webhook {

namespace {

using policy::Diagnostics;
using policy::Json;
using policy::JsonObject;
using policy::OrderedJson;

constexpr std::string_view kApiVersion = "admission.k8s.io/v1";

std::string dumpJson(const OrderedJson& json) {
  // Replace rather than throw on invalid UTF-8 (everything here came from parsed JSON, so
  // this is belt and braces).
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// `object.key` must be the string `expected` (or absent, unless `required`).
void expectValue(const JsonObject& object, std::string_view key, std::string_view expected,
                 bool required) {
  const Json* value = object.member(key);
  if (value == nullptr) {
    if (required) {
      object.diagnostics().add(object.pathOf(key),
                               "missing (expected \"" + std::string(expected) + "\")");
    }
    return;
  }
  if (!value->is_string() || value->get_ref<const std::string&>() != expected) {
    object.diagnostics().add(object.pathOf(key), "expected \"" + std::string(expected) +
                                                     "\", got " + policy::describeJson(*value));
  }
}

std::string joinedWith(const Diagnostics& diagnostics, std::string_view separator) {
  std::string out;
  for (const Error& e : diagnostics.errors()) {
    if (!out.empty()) out += separator;
    out += e.message;
  }
  return out;
}

}  // namespace

Result<BindingReview> parseBindingReview(std::string_view body) {
  Diagnostics diagnostics;
  const std::optional<Json> json = policy::parseJsonText(body, diagnostics);
  if (!json) return Error{"the body is not JSON: " + diagnostics.joined()};
  if (!json->is_object()) {
    return Error{"the body: expected an AdmissionReview object, got " +
                 policy::describeJson(*json)};
  }
  JsonObject root(*json, "", diagnostics);
  expectValue(root, "apiVersion", kApiVersion, true);
  expectValue(root, "kind", "AdmissionReview", true);
  BindingReview out;
  const JsonObject request = root.object("request");
  if (!request.valid()) {
    if (root.member("request") == nullptr)
      diagnostics.add("request", "missing (an object is required)");
  } else {
    out.uid = request.requiredString("uid");
    const JsonObject kind = request.object("kind");
    if (kind.valid()) {
      out.kindGroup = kind.string("group").value_or("");
      out.kindVersion = kind.string("version").value_or("");
      out.kind = kind.string("kind").value_or("");
    }
    const JsonObject resource = request.object("resource");
    if (resource.valid()) {
      out.resourceGroup = resource.string("group").value_or("");
      out.resourceVersion = resource.string("version").value_or("");
      out.resource = resource.string("resource").value_or("");
    }
    out.subResource = request.string("subResource").value_or("");
    out.operation = request.string("operation").value_or("");
    out.ns = request.string("namespace").value_or("");
    out.name = request.string("name").value_or("");
    out.dryRun = request.boolean("dryRun").value_or(false);
    // POST pods/NAME/binding (the scheduler's), or POST bindings — the older resource that
    // binds a pod just the same and is what `kubectl create -f` of a Binding posts to.
    out.isBinding = out.resourceGroup.empty() && out.operation == "CREATE" &&
                    ((out.resource == "pods" && out.subResource == "binding") ||
                     (out.resource == "bindings" && out.subResource.empty()));
    if (out.isBinding && diagnostics.empty()) {
      const JsonObject object = request.object("object");
      if (!object.valid() && request.member("object") == nullptr) {
        diagnostics.add(request.pathOf("object"), "missing (a Binding is required)");
      }
      if (object.valid()) {
        expectValue(object, "kind", "Binding", false);
        const JsonObject metadata = object.object("metadata");
        if (metadata.valid()) {
          out.podNamespace = metadata.string("namespace").value_or("");
          out.podName = metadata.string("name").value_or("");
          out.podUid = metadata.string("uid").value_or("");
        }
        if (out.podNamespace.empty()) out.podNamespace = out.ns;
        if (out.podName.empty()) out.podName = out.name;
        if (out.podName.empty()) {
          diagnostics.add(object.pathOf("metadata") + ".name",
                          "missing, and request.name is empty: which pod is bound?");
        }
        if (out.podNamespace.empty()) {
          diagnostics.add(object.pathOf("metadata") + ".namespace",
                          "missing, and request.namespace is empty: which pod is bound?");
        }
        const JsonObject target = object.object("target");
        if (!target.valid()) {
          if (object.member("target") == nullptr) {
            diagnostics.add(object.pathOf("target"), "missing (an object is required)");
          }
        } else {
          expectValue(target, "kind", "Node", true);
          out.node = target.requiredString("name");
          out.targetApiVersion = target.string("apiVersion").value_or("");
        }
      }
    }
  }
  if (!diagnostics.empty()) return Error{joinedWith(diagnostics, "; ")};
  return out;
}

std::string admissionReviewResponse(const std::string& uid, const ReviewAnswer& answer) {
  OrderedJson response = OrderedJson::object();
  response["uid"] = uid;
  response["allowed"] = answer.allowed;
  if (!answer.allowed) {
    OrderedJson status = OrderedJson::object();
    status["code"] = answer.code;
    if (!answer.reason.empty()) status["reason"] = answer.reason;
    status["message"] = answer.message;
    if (!answer.detail.empty()) {
      OrderedJson cause = OrderedJson::object();
      cause["reason"] = answer.reason;
      cause["message"] = answer.detail;
      status["details"]["causes"] = OrderedJson::array({std::move(cause)});
    }
    response["status"] = std::move(status);
  }
  if (!answer.warnings.empty()) response["warnings"] = answer.warnings;
  OrderedJson review = OrderedJson::object();
  review["apiVersion"] = kApiVersion;
  review["kind"] = "AdmissionReview";
  review["response"] = std::move(response);
  return dumpJson(review);
}

}  // namespace nodewarden::webhook
