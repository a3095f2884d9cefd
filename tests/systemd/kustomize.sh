#!/bin/sh
# The Kubernetes manifests (systemd/kubernetes): `kubectl kustomize` renders them, and the
# rendered objects hold what the agent and the webhook depend on — every object is there, the
# DaemonSet runs with host PIDs, the host cgroupfs read-write, critical priority, every taint
# tolerated, unprivileged (no capability but the documented set, KILL; RuntimeDefault
# seccomp), its node name from the downward API and probes on the port it listens on; the
# webhook's Service, container port and registration agree; the admission registration is
# the one documented (pods/binding CREATE, v1, NoneOnDryRun, Ignore, 2 s, kube-system out);
# RBAC grants exactly the verbs the code uses; the policy ConfigMap passes check-policy; the
# cert-manager component renders on top of the base.
# Usage: kustomize.sh KUBERNETES_DIR NODEWARDEN_BINARY
# Exit 0 pass, 1 fail, 77 skip (no kubectl).
#
# Everything is read with kubectl alone, offline: `kubectl label --local -f FILE -o jsonpath=…`
# parses an object and prints fields from it without a cluster (KUBECONFIG points nowhere,
# so nothing can reach one).
set -u
dir=$1
exe=$2
case $dir in /*) ;; *) dir=$(pwd)/$dir ;; esac
case $exe in /*) ;; *) exe=$(pwd)/$exe ;; esac

if ! command -v kubectl >/dev/null 2>&1; then
  echo "SKIP: kubectl not found (it renders the kustomization)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nodewarden-kustomize.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
export KUBECONFIG="$tmp/no-kubeconfig"

status=0
fail() { echo "FAIL: $*" >&2; status=1; }

# render DIR OUT: kubectl kustomize, then one file per object, OUT.index lists "Kind/name FILE".
render() {
  if ! kubectl kustomize "$1" >"$2.yaml" 2>"$2.err"; then
    cat "$2.err" >&2
    return 1
  fi
  mkdir -p "$2" || return 1
  awk -v d="$2" 'BEGIN { n = 0 } /^---$/ { n++; next } { print > (d "/" n ".yaml") }' "$2.yaml"
  : >"$2.index"
  for f in "$2"/*.yaml; do
    id=$(kubectl label --local -f "$f" -o jsonpath='{.kind}/{.metadata.name}' x- 2>&1) ||
      { echo "$f: $id" >&2; return 1; }
    echo "$id $f" >>"$2.index"
  done
}

# obj KIND/NAME: the file holding that object of the base's render ("" when absent).
obj() { awk -v id="$1" '$1 == id { print $2 }' "$tmp/base.index"; }

# q FILE JSONPATH: the value(s) at JSONPATH in the object in FILE.
q() {
  [ -n "$1" ] || return 0
  kubectl label --local -f "$1" -o jsonpath="$2" x- 2>/dev/null
}

# expect WHAT ACTUAL WANTED
expect() {
  [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}

if ! render "$dir" "$tmp/base"; then
  echo "FAIL: kubectl kustomize $dir" >&2
  exit 1
fi

# --- every object, nothing else ---------------------------------------------------------
policy_cm=$(awk '$1 ~ /^ConfigMap\/nodewarden-policy-[a-z0-9]+$/ { sub(/^ConfigMap\//, "", $1); print $1 }' \
  "$tmp/base.index")
[ -n "$policy_cm" ] || fail "no generated ConfigMap nodewarden-policy-<hash>"
got=$(awk '{ print $1 }' "$tmp/base.index" | sort | tr '\n' ' ')
want=$(sort <<EOF | tr '\n' ' '
ServiceAccount/nodewarden-agent
ServiceAccount/nodewarden-webhook
ClusterRole/nodewarden-agent
ClusterRole/nodewarden-webhook
ClusterRoleBinding/nodewarden-agent
ClusterRoleBinding/nodewarden-webhook
ConfigMap/$policy_cm
DaemonSet/nodewarden-agent
Deployment/nodewarden-webhook
PodDisruptionBudget/nodewarden-webhook
Service/nodewarden-webhook
ValidatingWebhookConfiguration/nodewarden-binding
EOF
)
expect "rendered objects" "$got" "$want"

for id in ServiceAccount/nodewarden-agent ServiceAccount/nodewarden-webhook "ConfigMap/$policy_cm" \
    DaemonSet/nodewarden-agent Deployment/nodewarden-webhook PodDisruptionBudget/nodewarden-webhook \
    Service/nodewarden-webhook; do
  expect "$id namespace" "$(q "$(obj "$id")" '{.metadata.namespace}')" kube-system
done
for id in $(awk '{ print $1 }' "$tmp/base.index"); do
  expect "$id label app.kubernetes.io/name" \
    "$(q "$(obj "$id")" '{.metadata.labels.app\.kubernetes\.io/name}')" nodewarden
done

# --- the policy ConfigMap passes check-policy ---------------------------------------------
q "$(obj "ConfigMap/$policy_cm")" '{.data.policy\.json}' >"$tmp/policy.json"
if [ ! -s "$tmp/policy.json" ]; then
  fail "ConfigMap $policy_cm has no data policy.json"
elif ! "$exe" check-policy "$tmp/policy.json" >"$tmp/check-policy.out" 2>&1; then
  cat "$tmp/check-policy.out" >&2
  fail "the policy ConfigMap does not pass nodewarden check-policy"
fi
max_grace=$(awk -F'[:,]' '/"evictionMaxPodGracePeriod"/ { gsub(/[ \t]/, "", $2); print $2 }' \
  "$tmp/policy.json")

# --- the agent's DaemonSet ----------------------------------------------------------------
ds=$(obj DaemonSet/nodewarden-agent)
pod='.spec.template.spec'
agent="$pod.containers[?(@.name==\"agent\")]"
expect "DaemonSet containers" "$(q "$ds" "{$pod.containers[*].name}")" agent
expect "DaemonSet hostPID" "$(q "$ds" "{$pod.hostPID}")" true
expect "DaemonSet hostNetwork" "$(q "$ds" "{$pod.hostNetwork}")" ""
expect "DaemonSet priorityClassName" "$(q "$ds" "{$pod.priorityClassName}")" system-node-critical
expect "DaemonSet serviceAccountName" "$(q "$ds" "{$pod.serviceAccountName}")" nodewarden-agent
expect "DaemonSet toleration operators" "$(q "$ds" "{$pod.tolerations[*].operator}")" Exists
expect "DaemonSet toleration key/effect (must tolerate everything)" \
  "$(q "$ds" "{$pod.tolerations[0].key}{$pod.tolerations[0].effect}")" ""
expect "DaemonSet updateStrategy" "$(q "$ds" '{.spec.updateStrategy.type}')" RollingUpdate
[ -n "$(q "$ds" '{.spec.updateStrategy.rollingUpdate.maxUnavailable}')" ] ||
  fail "DaemonSet: no rollingUpdate.maxUnavailable"
grace=$(q "$ds" "{$pod.terminationGracePeriodSeconds}")
case $grace in
  '' | *[!0-9]*) fail "DaemonSet terminationGracePeriodSeconds: '$grace'" ;;
  *) if [ -n "$max_grace" ] && [ "$grace" -le "$max_grace" ]; then
       fail "DaemonSet terminationGracePeriodSeconds $grace <= evictionMaxPodGracePeriod $max_grace" \
         "(a drain lets soft evictions under way finish)"
     fi ;;
esac
# Least privilege: no container of the DaemonSet is privileged or may gain privileges, and
# the agent drops every capability and adds back exactly the set that
# tests/e2e/capabilities_test.cpp proves (kDaemonSetCaps there; why each, in daemonset.yaml).
agent_caps=$(printf 'KILL\nSYS_NICE')
# caps FILE JSONPATH: capability names one a line, upper case, without CAP_, sorted.
caps() { q "$1" "{range $2[*]}{@}{\"\\n\"}{end}" | tr 'a-z' 'A-Z' | sed 's/^CAP_//; /^$/d' | sort -u; }
for kind in initContainers containers; do
  for c in $(q "$ds" "{$pod.$kind[*].name}"); do
    sc="$pod.$kind[?(@.name==\"$c\")].securityContext"
    [ "$(q "$ds" "{$sc.privileged}")" = true ] && fail "DaemonSet $kind $c is privileged"
    [ "$(q "$ds" "{$sc.allowPrivilegeEscalation}")" = false ] ||
      fail "DaemonSet $kind $c: allowPrivilegeEscalation is not false"
    extra=$(caps "$ds" "$sc.capabilities.add" | grep -vxF -- "$agent_caps")
    [ -z "$extra" ] ||
      fail "DaemonSet $kind $c adds capabilities outside the documented set ($agent_caps):" $extra
    expect "DaemonSet $kind $c capabilities.drop" "$(caps "$ds" "$sc.capabilities.drop")" ALL
  done
done
expect "agent capabilities.add" "$(caps "$ds" "$agent.securityContext.capabilities.add")" "$agent_caps"
# No host namespace beyond PIDs (hostNetwork is checked above).
expect "DaemonSet hostIPC" "$(q "$ds" "{$pod.hostIPC}")" ""
seccomp=$(q "$ds" "{$agent.securityContext.seccompProfile.type}")
[ -n "$seccomp" ] || seccomp=$(q "$ds" "{$pod.securityContext.seccompProfile.type}")
expect "agent seccompProfile" "$seccomp" RuntimeDefault
expect "agent NODE_NAME fieldRef" \
  "$(q "$ds" "{$agent.env[?(@.name==\"NODE_NAME\")].valueFrom.fieldRef.fieldPath}")" spec.nodeName
# The arguments, one per line, then pairs "flag value" as the binary reads them.
q "$ds" "{range $agent.args[*]}{@}{\"\\n\"}{end}" >"$tmp/agent.args"
expect "agent args[0]" "$(sed -n 1p "$tmp/agent.args")" agent
arg() { awk -v f="$2" 'prev == f { print; exit } { prev = $0 }' "$1"; }
expect "agent --source" "$(arg "$tmp/agent.args" --source)" kubernetes
expect "agent --node" "$(arg "$tmp/agent.args" --node)" '$(NODE_NAME)'
expect "agent --policy" "$(arg "$tmp/agent.args" --policy)" /etc/nodewarden/policy.json
expect "agent --cgroup-root" "$(arg "$tmp/agent.args" --cgroup-root)" /host/sys/fs/cgroup
listen=$(arg "$tmp/agent.args" --listen)
expect "agent --listen address" "${listen%:*}" 0.0.0.0
grep -qx -- '--dry-run' "$tmp/agent.args" && fail "agent runs with --dry-run"

# port_of FILE CONTAINER_PATH PORT: a probe's port as a number (a name is looked up).
port_of() {
  case $3 in
    '' | *[!0-9]*) q "$1" "{$2.ports[?(@.name==\"$3\")].containerPort}" ;;
    *) echo "$3" ;;
  esac
}
agent_port=$(q "$ds" "{$agent.ports[*].containerPort}")
expect "agent containerPort = --listen port" "$agent_port" "${listen##*:}"
probes='livenessProbe:/healthz readinessProbe:/readyz'
# A startup probe, when there is one, holds liveness back until /healthz first answers.
[ -n "$(q "$ds" "{$agent.startupProbe}")" ] && probes="$probes startupProbe:/healthz"
for probe in $probes; do
  name=${probe%%:*}
  expect "agent $name path" "$(q "$ds" "{$agent.$name.httpGet.path}")" "${probe#*:}"
  expect "agent $name port" "$(port_of "$ds" "$agent" "$(q "$ds" "{$agent.$name.httpGet.port}")")" \
    "${listen##*:}"
done
# The host cgroupfs, read-write, where --cgroup-root says.
vol=$(q "$ds" "{$agent.volumeMounts[?(@.mountPath==\"/host/sys/fs/cgroup\")].name}")
[ -n "$vol" ] || fail "agent: nothing mounted at /host/sys/fs/cgroup"
expect "cgroup mount readOnly" \
  "$(q "$ds" "{$agent.volumeMounts[?(@.mountPath==\"/host/sys/fs/cgroup\")].readOnly}" | sed 's/^false$//')" ""
expect "cgroup volume hostPath" "$(q "$ds" "{$pod.volumes[?(@.name==\"$vol\")].hostPath.path}")" /sys/fs/cgroup
# The policy ConfigMap at /etc/nodewarden, as a directory (subPath never sees updates).
vol=$(q "$ds" "{$agent.volumeMounts[?(@.mountPath==\"/etc/nodewarden\")].name}")
[ -n "$vol" ] || fail "agent: nothing mounted at /etc/nodewarden"
expect "agent policy mount subPath" \
  "$(q "$ds" "{$agent.volumeMounts[?(@.mountPath==\"/etc/nodewarden\")].subPath}")" ""
expect "agent policy volume" "$(q "$ds" "{$pod.volumes[?(@.name==\"$vol\")].configMap.name}")" "$policy_cm"
# Guaranteed QoS: requests == limits, both set.
for r in cpu memory; do
  req=$(q "$ds" "{$agent.resources.requests.$r}")
  lim=$(q "$ds" "{$agent.resources.limits.$r}")
  [ -n "$req" ] || fail "agent: no $r request"
  expect "agent $r limit = request (Guaranteed)" "$lim" "$req"
done
# The kustomization's images entry applies (it tags the image; operators name the registry).
image=$(q "$ds" "{$agent.image}")
case $image in nodewarden:?* | */nodewarden:?*) ;; *) fail "agent image '$image' (the images entry did not apply)" ;; esac

# --- the webhook: Deployment, PDB, Service -------------------------------------------------
dep=$(obj Deployment/nodewarden-webhook)
wh="$pod.containers[?(@.name==\"webhook\")]"
expect "webhook replicas" "$(q "$dep" '{.spec.replicas}')" 2
expect "webhook serviceAccountName" "$(q "$dep" "{$pod.serviceAccountName}")" nodewarden-webhook
expect "webhook anti-affinity topologyKey" "$(q "$dep" \
  "{$pod.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[*].podAffinityTerm.topologyKey}{$pod.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[*].topologyKey}")" \
  kubernetes.io/hostname
expect "webhook image = agent image" "$(q "$dep" "{$wh.image}")" "$image"
q "$dep" "{range $wh.args[*]}{@}{\"\\n\"}{end}" >"$tmp/webhook.args"
expect "webhook args[0]" "$(sed -n 1p "$tmp/webhook.args")" webhook
expect "webhook --policy" "$(arg "$tmp/webhook.args" --policy)" /etc/nodewarden/policy.json
wlisten=$(arg "$tmp/webhook.args" --listen)
expect "webhook --listen address" "${wlisten%:*}" 0.0.0.0
wport=${wlisten##*:}
cert=$(arg "$tmp/webhook.args" --tls-cert)
key=$(arg "$tmp/webhook.args" --tls-key)
[ -n "$cert" ] && [ -n "$key" ] || fail "webhook: --tls-cert/--tls-key missing"
expect "webhook containerPort = --listen port" "$(q "$dep" "{$wh.ports[*].containerPort}")" "$wport"
for probe in livenessProbe:/healthz readinessProbe:/readyz; do
  name=${probe%%:*}
  expect "webhook $name path" "$(q "$dep" "{$wh.$name.httpGet.path}")" "${probe#*:}"
  expect "webhook $name scheme" "$(q "$dep" "{$wh.$name.httpGet.scheme}")" HTTPS
  expect "webhook $name port" "$(port_of "$dep" "$wh" "$(q "$dep" "{$wh.$name.httpGet.port}")")" "$wport"
done
[ -n "$(q "$dep" "{$wh.resources.requests.memory}")" ] || fail "webhook: no memory request"
# The TLS pair and the policy come from the volume mounted at /etc/nodewarden.
vol=$(q "$dep" "{$wh.volumeMounts[?(@.mountPath==\"/etc/nodewarden\")].name}")
[ -n "$vol" ] || fail "webhook: nothing mounted at /etc/nodewarden"
v="$pod.volumes[?(@.name==\"$vol\")]"
expect "webhook policy source" "$(q "$dep" "{$v.projected.sources[*].configMap.name}")" "$policy_cm"
expect "webhook TLS secret" "$(q "$dep" "{$v.projected.sources[*].secret.name}")" nodewarden-webhook-tls
expect "webhook TLS paths" \
  "$(q "$dep" "{$v.projected.sources[*].secret.items[*].path}" | tr ' ' '\n' | sed 's|^|/etc/nodewarden/|' | paste -sd' ')" \
  "$cert $key"

pdb=$(obj PodDisruptionBudget/nodewarden-webhook)
expect "webhook PDB minAvailable" "$(q "$pdb" '{.spec.minAvailable}')" 1
# labels_of FILE JSONPATH: a label map as sorted "k=v" lines.
# (Label keys and values cannot contain ',', ':' or '"'.)
labels_of() { q "$1" "$2" | tr -d '{}"' | tr ',' '\n' | tr ':' '=' | sort; }
template_labels=$(labels_of "$dep" '{.spec.template.metadata.labels}')
# contained SUBSET SET: every line of SUBSET is a line of SET.
contained() { [ -n "$1" ] && [ -z "$(printf '%s\n' "$1" | grep -vxF -- "$2")" ]; }
contained "$(labels_of "$pdb" '{.spec.selector.matchLabels}')" "$template_labels" ||
  fail "the PDB's selector does not select the webhook's pods"
contained "$(labels_of "$dep" '{.spec.selector.matchLabels}')" "$template_labels" ||
  fail "the Deployment's selector does not select its own pods"
contained "$(labels_of "$ds" '{.spec.selector.matchLabels}')" "$(labels_of "$ds" '{.spec.template.metadata.labels}')" ||
  fail "the DaemonSet's selector does not select its own pods"

svc=$(obj Service/nodewarden-webhook)
contained "$(labels_of "$svc" '{.spec.selector}')" "$template_labels" ||
  fail "the Service's selector does not select the webhook's pods"
contained "$(labels_of "$svc" '{.spec.selector}')" "$(labels_of "$ds" '{.spec.template.metadata.labels}')" &&
  fail "the Service's selector also selects the agent's pods"
svc_port=$(q "$svc" '{.spec.ports[*].port}')
expect "Service port" "$svc_port" 443
target=$(q "$svc" '{.spec.ports[*].targetPort}')
expect "Service targetPort = webhook container port" "$(port_of "$dep" "$wh" "$target")" "$wport"

# --- the admission registration -----------------------------------------------------------
vwc=$(obj ValidatingWebhookConfiguration/nodewarden-binding)
w='.webhooks[0]'
expect "webhooks" "$(q "$vwc" '{.webhooks[*].name}')" binding.nodewarden.io
expect "webhook rules apiGroups" "$(q "$vwc" "{$w.rules[*].apiGroups}")" '[""]'
expect "webhook rules apiVersions" "$(q "$vwc" "{$w.rules[*].apiVersions}")" '["v1"]'
expect "webhook rules operations" "$(q "$vwc" "{$w.rules[*].operations}")" '["CREATE"]'
expect "webhook rules resources" "$(q "$vwc" "{$w.rules[*].resources}")" '["pods/binding","bindings"]'
expect "webhook failurePolicy" "$(q "$vwc" "{$w.failurePolicy}")" Ignore
expect "webhook sideEffects" "$(q "$vwc" "{$w.sideEffects}")" NoneOnDryRun
expect "webhook admissionReviewVersions" "$(q "$vwc" "{$w.admissionReviewVersions}")" '["v1"]'
expect "webhook timeoutSeconds" "$(q "$vwc" "{$w.timeoutSeconds}")" 2
expect "webhook namespaceSelector" \
  "$(q "$vwc" "{$w.namespaceSelector.matchExpressions[?(@.key==\"kubernetes.io/metadata.name\")].operator} {$w.namespaceSelector.matchExpressions[?(@.key==\"kubernetes.io/metadata.name\")].values}")" \
  'NotIn ["kube-system"]'
expect "webhook service" "$(q "$vwc" "{$w.clientConfig.service.namespace}/{$w.clientConfig.service.name}")" \
  "$(q "$svc" '{.metadata.namespace}/{.metadata.name}')"
expect "webhook service port" "$(q "$vwc" "{$w.clientConfig.service.port}")" "$svc_port"
expect "webhook service path" "$(q "$vwc" "{$w.clientConfig.service.path}")" /v1/admission-review
expect "webhook url (service only)" "$(q "$vwc" "{$w.clientConfig.url}")" ""

# --- RBAC: exactly these (group resource verb) triples, no wildcard, no resourceNames ------
# rbac FILE: "group|resource|verb" lines, sorted; "!" lines for resourceNames/nonResourceURLs.
rbac() {
  q "$1" '{range .rules[*]}{.apiGroups}|{.resources}|{.verbs}|{.resourceNames}{.nonResourceURLs}{"\n"}{end}' |
    awk -F'|' '
      function split_list(s, out,   n, i) {
        gsub(/^\[|\]$/, "", s)
        if (s == "") return 0
        n = split(s, out, ",")
        for (i = 1; i <= n; i++) gsub(/"/, "", out[i])  # [""] is the core group
        return n
      }
      NF == 0 { next }
      {
        if ($4 != "") print "! restricted or non-resource rule: " $0
        ng = split_list($1, g); nr = split_list($2, r); nv = split_list($3, v)
        if (ng == 0 || nr == 0 || nv == 0) print "! incomplete rule: " $0
        for (i = 1; i <= ng; i++) for (j = 1; j <= nr; j++) for (k = 1; k <= nv; k++)
          print g[i] "|" r[j] "|" v[k]
      }' | sort
}
# "" is the core group.
agent_rbac='|pods|list
|pods|watch
|pods|delete
|pods/status|patch
|pods/eviction|create
|events|create
|nodes|list
|nodes|watch
|nodes/status|patch
scheduling.k8s.io|priorityclasses|list
scheduling.k8s.io|priorityclasses|watch
policy|poddisruptionbudgets|list
policy|poddisruptionbudgets|watch'
webhook_rbac='|pods|get
|pods|list
|pods|watch
|nodes|get
|nodes|list
|nodes|watch
scheduling.k8s.io|priorityclasses|get
scheduling.k8s.io|priorityclasses|list
scheduling.k8s.io|priorityclasses|watch
policy|poddisruptionbudgets|get
policy|poddisruptionbudgets|list
policy|poddisruptionbudgets|watch
|pods/eviction|create
|pods/status|patch
|events|create'
for who in agent webhook; do
  case $who in agent) want=$agent_rbac ;; *) want=$webhook_rbac ;; esac
  want=$(printf '%s\n' "$want" | sort)
  got=$(rbac "$(obj "ClusterRole/nodewarden-$who")")
  if [ "$got" != "$want" ]; then
    fail "ClusterRole nodewarden-$who grants other than expected:"
    printf '%s\n' "$want" >"$tmp/want"
    printf '%s\n' "$got" >"$tmp/got"
    diff "$tmp/want" "$tmp/got" | sed -n 's/^[<>]/  &/p' >&2
  fi
  crb=$(obj "ClusterRoleBinding/nodewarden-$who")
  expect "ClusterRoleBinding nodewarden-$who roleRef" "$(q "$crb" '{.roleRef.kind}/{.roleRef.name}')" \
    "ClusterRole/nodewarden-$who"
  expect "ClusterRoleBinding nodewarden-$who subjects" \
    "$(q "$crb" '{range .subjects[*]}{.kind}:{.namespace}/{.name} {end}')" \
    "ServiceAccount:kube-system/nodewarden-$who "
done

# --- the cert-manager component renders on top of the base ---------------------------------
mkdir -p "$tmp/with-cert-manager"
rel=$(cd "$tmp/with-cert-manager" && awk -v from="$PWD" -v to="$dir" 'BEGIN {
  # a relative path from "from" to "to" (kustomize refuses absolute ones)
  nf = split(from, f, "/"); nt = split(to, t, "/"); i = 2
  while (i <= nf && i <= nt && f[i] == t[i]) i++
  p = ""; for (j = i; j <= nf; j++) p = p "../"
  for (j = i; j <= nt; j++) p = p t[j] (j < nt ? "/" : "")
  print p }')
cat >"$tmp/with-cert-manager/kustomization.yaml" <<EOF
resources:
- $rel
components:
- $rel/components/cert-manager
EOF
if render "$tmp/with-cert-manager" "$tmp/cm"; then
  c=$(awk '$1 == "Certificate/nodewarden-webhook" { print $2 }' "$tmp/cm.index")
  i=$(awk '$1 == "Issuer/nodewarden-selfsigned" { print $2 }' "$tmp/cm.index")
  v=$(awk '$1 == "ValidatingWebhookConfiguration/nodewarden-binding" { print $2 }' "$tmp/cm.index")
  [ -n "$c" ] && [ -n "$i" ] || fail "cert-manager component: no Certificate/Issuer"
  expect "Certificate secretName" "$(q "$c" '{.spec.secretName}')" nodewarden-webhook-tls
  expect "Certificate dnsNames[0]" "$(q "$c" '{.spec.dnsNames[0]}')" nodewarden-webhook.kube-system.svc
  expect "Certificate issuer" "$(q "$c" '{.spec.issuerRef.name}')" "$(q "$i" '{.metadata.name}')"
  expect "inject-ca-from" "$(q "$v" '{.metadata.annotations.cert-manager\.io/inject-ca-from}')" \
    "$(q "$c" '{.metadata.namespace}/{.metadata.name}')"
  expect "caBundle placeholder removed" "$(q "$v" '{.webhooks[0].clientConfig.caBundle}')" ""
else
  fail "kubectl kustomize with components/cert-manager"
fi

[ "$status" -eq 0 ] && echo "ok: $(wc -l <"$tmp/base.index") objects rendered and checked"
exit "$status"
