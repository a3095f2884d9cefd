// The AdmissionReview wire format (admission.k8s.io/v1) as the binding webhook speaks it
// (docs/reference.md §7 POST /v1/admission-review): what nodewarden reads of a review, and the
// response it writes. Pure: no I/O, no clock, no state; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace nodewarden::webhook {

// What nodewarden reads of an AdmissionReview (admission.k8s.io/v1). For a pods/binding CREATE
// the Binding's fields are filled in; for any other review only the request's identity.
struct BindingReview {
  std::string uid;                                       // request.uid, echoed in the response
  std::string kindGroup, kindVersion, kind;              // request.kind
  std::string resourceGroup, resourceVersion, resource;  // request.resource
  std::string subResource;                               // request.subResource
  std::string operation;                                 // CREATE, UPDATE, ...
  std::string ns;                                        // request.namespace
  std::string name;                                      // request.name
  bool dryRun = false;
  // True for a pods/binding CREATE, or a CREATE of the core group's `bindings` resource (the
  // older way to bind a pod, which `kubectl create -f` of a Binding takes); the fields below
  // are set only then.
  bool isBinding = false;
  std::string podNamespace;      // object.metadata.namespace, else request.namespace
  std::string podName;           // object.metadata.name, else request.name
  std::string podUid;            // object.metadata.uid; may be empty
  std::string targetApiVersion;  // object.target.apiVersion; may be empty (the scheduler omits it)
  std::string node;              // object.target.name (object.target.kind is "Node")

  std::string podKey() const { return podNamespace + "/" + podName; }
};

// Parses an AdmissionReview. Errors name the JSON path: `apiVersion: expected
// "admission.k8s.io/v1", got "admission.k8s.io/v1beta1"`, `request.uid: missing (a string is
// required)`, `request.object.target.name: expected a string, got 12`; several problems are
// joined with "; ". A review that is not a pods/binding CREATE is not an error (isBinding is
// false). Pure; any thread.
Result<BindingReview> parseBindingReview(std::string_view body);

// What the webhook answers to one review.
struct ReviewAnswer {
  bool allowed = true;
  unsigned code = 403;  // status.code when denied
  std::string reason;   // status.reason: the §5 reason ("OutOfmemory")
  std::string message;  // status.message: the §5 reason too, as docs/reference.md §7 says
  // For people: "<reason>: <message>[: victims]", in status.details.causes[0].message.
  std::string detail;
  std::vector<std::string> warnings;
};

// The AdmissionReview response to the review `uid`, as one line of JSON: `status` is omitted
// when allowed, `warnings` when empty. Pure; any thread.
std::string admissionReviewResponse(const std::string& uid, const ReviewAnswer& answer);

}  // namespace nodewarden::webhook
