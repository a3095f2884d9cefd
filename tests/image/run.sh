#!/bin/bash
# The container image the Kubernetes manifests name, built and run with no registry and no
# cluster: the Debian package of BINARY (packaging/build-deb.sh) installed into a debootstrap
# root and written as an OCI image (packaging/build-image.sh, whose Debian base is cached per
# machine), then run under a real OCI runtime (runc; OCI_RUNTIME=crun for crun) as the rendered
# DaemonSet states it.
#
#   run.sh SOURCE_ROOT BINARY [IMAGE_LAYOUT]
#
# Exit 0 pass, 1 fail, 77 skip (what is missing is named). Without IMAGE_LAYOUT the image is
# built here from BINARY; with it (./dev image), that image is checked and run.
#
# 1. The image: tagged as systemd/kubernetes/ names it (the agent's and the webhook's
#    `image:` after `kubectl kustomize`), holding /usr/bin/nodewarden, its libraries (every
#    DT_NEEDED resolved inside) and the shipped defaults; `nodewarden version` and
#    `nodewarden check-policy /etc/nodewarden/policy.json` run in a container of it.
# 2. The agent from the image, its OCI config made from the rendered DaemonSet by
#    pod-to-oci.jq: its args and env, `securityContext` (root; capabilities drop ALL add
#    KILL; no privilege escalation; seccomp RuntimeDefault, which is CRI-O's profile from
#    /usr/share/containers/seccomp.json; the root filesystem read-only only if the manifest
#    says so), hostPID, its own network namespace, its resources, and every volume mounted
#    as the manifest mounts it: the host's /sys/fs/cgroup (read-write), the kubelet directory
#    (read-only, HostToContainer), the policy ConfigMap's data, the state directory and the
#    static pod manifests. The container's cgroup is the agent pod's own, inside a sandbox
#    kubepods cgroup that this test makes (`nodewarden-image-<pid>` in every hierarchy).
#    Substitutions, all for running without an API server: `--source kubernetes` becomes
#    `--source static --manifests` on the static pods directory the DaemonSet already mounts
#    (so --pod-cache and --static-pod-manifests, which are for --source kubernetes, go), and
#    `--kubepods-cgroup` names the sandbox; `--log-format json` is added for the checks.
#    Then: /readyz answers 200 within the startupProbe's budget (in the container's network
#    namespace, on 127.0.0.1:<containerPort>); /v1/state lists the sandbox's pods, the
#    agent's own (never evictable) among them; the kernel shows the agent's process with
#    UID 0, only the capabilities the DaemonSet adds (KILL, SYS_NICE), no_new_privs and a
#    seccomp filter; and that its loop thread runs at the niceness --nice asks (SYS_NICE);
#    a pod whose processes run as UID 65534 goes below a soft threshold the test adds on the
#    sandbox's allocatable memory (the shipped policy watches the whole machine's memory),
#    and the agent evicts it
#    (SIGTERM to another user's processes: CAP_KILL, under the seccomp filter); SIGTERM
#    stops the agent with status 0.
set -u
src=$1 bin=$2
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
here=$(cd "$(dirname "$0")" && pwd -P)
status=0
fail() { echo "FAIL: $*" >&2; status=1; }
skip() { echo "SKIP: $*"; exit 77; }
say() { echo "== $*"; }

[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot, cgroups, an OCI runtime)"
for tool in umoci debootstrap jq kubectl curl nsenter dpkg-deb setpriv; do
  command -v "$tool" >/dev/null 2>&1 ||
    skip "$tool not found (./dev image installs runc umoci debootstrap jq golang-github-containers-common)"
done
# The OCI runtime: runc, containerd's default (OCI_RUNTIME=crun for Debian's crun; crun 1.8
# refuses a hybrid host whose cgroup2 mount has a controller: "cgroups in hybrid mode not
# supported, drop all controllers from cgroupv2").
runtime=${OCI_RUNTIME:-runc}
command -v "$runtime" >/dev/null 2>&1 || skip "$runtime not found (./dev image installs runc)"
profile=/usr/share/containers/seccomp.json
[ -f "$profile" ] || skip "$profile not found (Debian's golang-github-containers-common: the RuntimeDefault seccomp profile)"
if readelf -d "$bin" 2>/dev/null | grep -q 'libasan\|libubsan'; then
  skip "$bin is a sanitizer build; the image carries what is shipped (the sanitizer pass skips this)"
fi

tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/nodewarden-image-test.XXXXXX") || exit 1
top=nodewarden-image-$$
cid=nodewarden-image-test-$$
mounts=  # the cgroup hierarchies the sandbox is in
cleanup() {
  "$runtime" kill "$cid" KILL >/dev/null 2>&1
  "$runtime" delete --force "$cid" >/dev/null 2>&1
  "$runtime" delete --force "$cid-check" >/dev/null 2>&1
  for m in $mounts; do
    [ -d "$m/$top" ] || continue
    find "$m/$top" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null
  done
  sleep 0.2
  for m in $mounts; do
    [ -d "$m/$top" ] && find "$m/$top" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  # The runtime makes the container's cgroup in every v1 controller, below the same path.
  for m in /sys/fs/cgroup/*/"$top" /sys/fs/cgroup/"$top"; do
    [ -d "$m" ] && find "$m" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# ---- the package and the image ----------------------------------------------------------
version=$("$bin" version | awk '{ print $2 }')
if [ -n "${3:-}" ]; then
  # Built already (./dev image): the layout, and the archive written beside it.
  layout=$(cd "$3" && pwd -P) || exit 1
  archive=$(ls "$(dirname "$layout")/nodewarden_${version}_"*.oci.tar 2>/dev/null | head -n 1)
  [ -n "$archive" ] || fail "no nodewarden_${version}_*.oci.tar beside $layout"
else
  t0=$SECONDS
  deb=$("$src/packaging/build-deb.sh" --out "$tmp" "$bin" 2>"$tmp/deb.log") ||
    { cat "$tmp/deb.log" >&2; echo "FAIL: packaging/build-deb.sh" >&2; exit 1; }
  archive=$("$src/packaging/build-image.sh" --out "$tmp" "$deb" 2>"$tmp/image.log")
  rc=$?
  cat "$tmp/image.log"
  [ $rc -eq 0 ] || { echo "FAIL: packaging/build-image.sh" >&2; exit 1; }
  layout=$tmp/nodewarden-image
  say "package and image in $((SECONDS - t0)) s: $(basename "$archive")"
fi

# What the manifests name.
export KUBECONFIG=$tmp/no-kubeconfig
kubectl kustomize "$src/systemd/kubernetes" >"$tmp/rendered.yaml" 2>"$tmp/kustomize.err" ||
  { cat "$tmp/kustomize.err" >&2; echo "FAIL: kubectl kustomize" >&2; exit 1; }
mkdir -p "$tmp/objects"
awk -v d="$tmp/objects" 'BEGIN { n = 0 } /^---$/ { n++; next } { print > (d "/" n ".yaml") }' "$tmp/rendered.yaml"
for f in "$tmp"/objects/*.yaml; do
  kubectl label --local -f "$f" -o json x- >"$f.json" 2>/dev/null || { fail "$f does not parse"; continue; }
  id=$(jq -r '"\(.kind)/\(.metadata.name)"' "$f.json")
  case $id in
    DaemonSet/nodewarden-agent) cp "$f.json" "$tmp/daemonset.json" ;;
    Deployment/nodewarden-webhook) cp "$f.json" "$tmp/webhook.json" ;;
    ConfigMap/nodewarden-policy-*) cp "$f.json" "$tmp/configmap-$(jq -r .metadata.name "$f.json").json" ;;
  esac
done
[ -f "$tmp/daemonset.json" ] && [ -f "$tmp/webhook.json" ] || { echo "FAIL: no agent DaemonSet or webhook Deployment rendered" >&2; exit 1; }
for obj in daemonset webhook; do
  ref=$(jq -r '.spec.template.spec.containers[0].image' "$tmp/$obj.json")
  [ "$ref" = "nodewarden:$version" ] || fail "the $obj names the image '$ref'; the image built is nodewarden:$version"
done
umoci ls --layout "$layout" | grep -qx "$version" || fail "the image layout has no tag $version: $(umoci ls --layout "$layout" | tr '\n' ' ')"
[ -z "$archive" ] || tar -tf "$archive" index.json oci-layout >/dev/null 2>&1 || fail "$(basename "$archive") is not an OCI layout archive"

# ---- inside the image -------------------------------------------------------------------
umoci unpack --keep-dirlinks --image "$layout:$version" "$tmp/bundle" >/dev/null ||
  { echo "FAIL: umoci unpack" >&2; exit 1; }
rootfs=$tmp/bundle/rootfs
for f in usr/bin/nodewarden etc/nodewarden/policy.json etc/default/nodewarden usr/share/doc/nodewarden/copyright; do
  [ -f "$rootfs/$f" ] || fail "no /$f in the image"
done
[ -d "$rootfs/etc/nodewarden/pods.d" ] || fail "no /etc/nodewarden/pods.d in the image"
cmp -s "$rootfs/etc/nodewarden/policy.json" "$src/systemd/nodewarden-policy.json" ||
  fail "the image's /etc/nodewarden/policy.json is not systemd/nodewarden-policy.json"
# Every library the binary names, found in the image's own library directories.
for lib in $(readelf -d "$rootfs/usr/bin/nodewarden" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  found=
  for d in usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu usr/lib/"$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)" usr/lib lib; do
    [ -e "$rootfs/$d/$lib" ] && found=$d && break
  done
  [ -n "$found" ] || fail "$lib (NEEDED by nodewarden) is not in the image"
done
# The image's config: entrypoint and user as the Containerfile had them.
manifest=$(jq -r --arg t "$version" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $t) | .digest' "$layout/index.json")
config_blob=$(jq -r '.config.digest' "$layout/blobs/sha256/${manifest#sha256:}")
jq '.config' "$layout/blobs/sha256/${config_blob#sha256:}" >"$tmp/image-config.json"
[ "$(jq -c .Entrypoint "$tmp/image-config.json")" = '["/usr/bin/nodewarden"]' ] || fail "Entrypoint: $(jq -c .Entrypoint "$tmp/image-config.json")"

# A container of the image, as it is: `version` (its default command) and check-policy.
cp "$tmp/bundle/config.json" "$tmp/umoci-config.json"
run_check() {  # run_check ARGS…: the image's entrypoint with ARGS in a plain container
  jq --argjson args "$(printf '%s\n' "$@" | jq -R . | jq -s .)" \
    '.process.terminal = false | .process.args = ["/usr/bin/nodewarden"] + $args' \
    "$tmp/umoci-config.json" >"$tmp/bundle/config.json"
  "$runtime" run --bundle "$tmp/bundle" "$cid-check" </dev/null 2>&1
}
out=$(run_check version)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'cgroup\|mount\|namespace\|Operation not permitted'; then
  echo "$out"
  skip "$runtime cannot start a container here (the sandbox refuses it; its words above)"
fi
[ $rc -eq 0 ] && [ "$out" = "nodewarden $version" ] || fail "nodewarden version in the image: rc $rc, '$out'"
echo "in the image: $out"
out=$(run_check check-policy /etc/nodewarden/policy.json)
rc=$?
[ $rc -eq 0 ] || fail "check-policy /etc/nodewarden/policy.json in the image: rc $rc, $out"
echo "in the image: check-policy /etc/nodewarden/policy.json: $(printf '%s\n' "$out" | head -n 1)"

# ---- the sandbox node -------------------------------------------------------------------
# The hierarchies the agent reads (v1 memory, cpuacct, pids, freezer; the cgroup2 mount),
# all below /sys/fs/cgroup, which the DaemonSet mounts whole.
while read -r mnt fstype superopts; do
  case $mnt in /sys/fs/cgroup|/sys/fs/cgroup/*) ;; *) continue ;; esac
  case $fstype in
    cgroup2) mounts="$mounts $mnt"; unified=$mnt ;;
    cgroup)
      case ,$superopts, in
        *,memory,*) mounts="$mounts $mnt"; memory=$mnt ;;
        *,cpuacct,*|*,pids,*|*,freezer,*) mounts="$mounts $mnt" ;;
      esac ;;
  esac
done <<EOF_MOUNTS
$(awk '{ for (i = 7; $i != "-"; i++); print $5, $(i + 1), $(i + 3) }' /proc/self/mountinfo)
EOF_MOUNTS
memory=${memory:-${unified:-}}
[ -n "$memory" ] || skip "no memory cgroup hierarchy below /sys/fs/cgroup"
pure_v2=0; [ "$memory" = "${unified:-}" ] && pure_v2=1
hog_uid=e2e0c0de-$(printf %04x $(($$ & 0xffff)))-4000-8000-000000000001
agent_uid=e2e0c0de-$(printf %04x $(($$ & 0xffff)))-4000-8000-000000000002
hog_cg=$top/kubepods/besteffort/pod$hog_uid
for m in $mounts; do
  mkdir -p "$m/$hog_cg" "$m/$top/kubepods/pod$agent_uid" || { echo "FAIL: mkdir $m/$hog_cg" >&2; exit 1; }
done
if [ $pure_v2 = 1 ]; then
  # cgroup v2 gives a child only the controllers its parent delegates.
  ctl=$(cat "$unified/cgroup.subtree_control")
  for d in "$top" "$top/kubepods" "$top/kubepods/besteffort" "$top/kubepods/pod$agent_uid"; do
    for c in memory pids cpu; do
      case " $ctl " in *" $c "*) echo "+$c" >"$unified/$d/cgroup.subtree_control" 2>/dev/null ;; esac
    done
  done
  echo 1G >"$memory/$top/kubepods/memory.max" && echo 0 >"$memory/$top/kubepods/memory.swap.max" 2>/dev/null
else
  echo 1G >"$memory/$top/kubepods/memory.limit_in_bytes"
  echo 1G >"$memory/$top/kubepods/memory.memsw.limit_in_bytes" 2>/dev/null
fi || { echo "FAIL: the sandbox kubepods memory limit" >&2; exit 1; }
# in_pod PROGRAM…: PROGRAM in the hog pod's cgroups (every hierarchy), as UID 65534.
in_pod() {
  # shellcheck disable=SC2016
  sh -c 'cg=$1; shift; for m in $MOUNTS; do echo $$ >"$m/$cg/cgroup.procs" || exit 1; done
         exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"' sh "$hog_cg" "$@" &
}
export MOUNTS="$mounts"

# ---- the agent's container from the DaemonSet -------------------------------------------
host=$tmp/host  # the node's directories the hostPath volumes name, but the cgroup root
jq '.spec.template.spec' "$tmp/daemonset.json" >"$tmp/podspec.json"
container=$(jq -r '.containers[0].name' "$tmp/podspec.json")
volumes='{}'
for v in $(jq -r '.volumes[] | @base64' "$tmp/podspec.json"); do
  vol=$(printf '%s' "$v" | base64 -d)
  vname=$(jq -r .name <<<"$vol")
  if path=$(jq -er '.hostPath.path' <<<"$vol"); then
    if [ "$path" = /sys/fs/cgroup ]; then dir=/sys/fs/cgroup; else dir=$host$path; mkdir -p "$dir"; fi
  elif cm=$(jq -er '.configMap.name' <<<"$vol"); then
    [ -f "$tmp/configmap-$cm.json" ] || { fail "volume $vname: no rendered ConfigMap $cm"; continue; }
    dir=$tmp/configmaps/$cm
    mkdir -p "$dir"
    for key in $(jq -r '.data | keys[]' "$tmp/configmap-$cm.json"); do
      jq -j --arg k "$key" '.data[$k]' "$tmp/configmap-$cm.json" >"$dir/$key"
    done
    # The shipped policy watches the whole machine's memory (memory.available), which this
    # test does not fill; one soft threshold is added on the sandbox node's allocatable
    # memory (its kubepods limit, 1 GiB): below 300Mi for 2 s.
    if [ -f "$dir/policy.json" ]; then
      jq '.evictionSoft["allocatableMemory.available"] = "300Mi"
          | .evictionSoftGracePeriod["allocatableMemory.available"] = "2s"' \
        "$dir/policy.json" >"$dir/policy.json.new" && mv "$dir/policy.json.new" "$dir/policy.json"
      "$bin" check-policy "$dir/policy.json" >/dev/null || fail "the test's policy does not validate"
    fi
  else
    dir=$tmp/volumes/$vname; mkdir -p "$dir"
  fi
  volumes=$(jq --arg n "$vname" --arg d "$dir" '. + {($n): $d}' <<<"$volumes")
done
static_dir=$(jq -r '.["static-pods"] // empty' <<<"$volumes")
[ -n "$static_dir" ] || { echo "FAIL: the DaemonSet has no static-pods volume (the static source reads it here)" >&2; exit 1; }
static_mount=$(jq -r --arg c "$container" '.containers[] | select(.name == $c) | .volumeMounts[] | select(.name == "static-pods") | .mountPath' "$tmp/podspec.json")
port=$(jq -r --arg c "$container" '.containers[] | select(.name == $c) | .ports[] | select(.name == "http") | .containerPort' "$tmp/podspec.json")
[ -n "$port" ] || { echo "FAIL: the agent has no http port" >&2; exit 1; }
node=image-test-node

# The pods the static source reads: the agent's own (system-node-critical, Guaranteed) and a
# best-effort pod whose process runs as another user.
jq -n --arg uid "$agent_uid" --slurpfile ds "$tmp/daemonset.json" '{
  apiVersion: "v1", kind: "Pod",
  metadata: {name: "nodewarden-agent-test", namespace: "kube-system", uid: $uid},
  spec: ($ds[0].spec.template.spec | {priorityClassName, priority: 2000001000, containers: [.containers[] | {name, resources}]}),
  status: {phase: "Running"}}' >"$static_dir/kube-system_nodewarden-agent-test.json"
jq -n --arg uid "$hog_uid" '{
  apiVersion: "v1", kind: "Pod",
  metadata: {name: "hog", namespace: "image-test", uid: $uid},
  spec: {containers: [{name: "main", resources: {}}], terminationGracePeriodSeconds: 5},
  status: {phase: "Running"}}' >"$static_dir/image-test_hog.json"
in_pod sleep 300
sleeper=$!

env=$(jq --arg node "$node" --arg c "$container" '[.containers[] | select(.name == $c) | .env[]? |
  {name, value: (if .value then .value
                 elif .valueFrom.fieldRef.fieldPath == "spec.nodeName" then $node
                 else error("env \(.name): only value and fieldRef spec.nodeName are translated") end)}]' \
  "$tmp/podspec.json") || { echo "FAIL: the agent's env" >&2; exit 1; }
caps=$(jq --arg c "$container" '[.containers[] | select(.name == $c) | .securityContext.capabilities.add[]? | "CAP_" + .]' "$tmp/podspec.json")
seccomp=$(jq --arg arch "$(dpkg --print-architecture)" --argjson caps "$caps" \
  --arg kernel "$(uname -r | sed 's/^\([0-9]*\.[0-9]*\).*/\1/')" -f "$here/seccomp.jq" "$profile") ||
  { echo "FAIL: converting $profile" >&2; exit 1; }
# The kubelet gives a Guaranteed pod's containers oom_score_adj -997; lowering it takes
# CAP_SYS_RESOURCE, which some sandboxes' root lacks: then the runtime would refuse to start.
if sh -c 'echo -997 >/proc/$$/oom_score_adj' 2>/dev/null; then
  lower_oom=true
else
  lower_oom=false
  echo "NOTE: no oom_score_adj -997 for the agent (Guaranteed QoS): this host's root may not lower oom_score_adj (CapBnd $(awk '/^CapBnd/ { print $2 }' /proc/self/status): no CAP_SYS_RESOURCE)"
fi
extra=$(jq -n --arg m "$static_mount" --arg k "$top/kubepods" '{
  replace: {"--source": ["--source", "static", "--manifests", $m]},
  drop: ["--pod-cache", "--static-pod-manifests"],
  append: ["--kubepods-cgroup", $k, "--log-format", "json"]}')
jq --argjson pod "$(cat "$tmp/podspec.json")" --arg name "$container" \
  --argjson entrypoint "$(jq -c '.Entrypoint // []' "$tmp/image-config.json")" \
  --argjson cmd "$(jq -c '.Cmd // []' "$tmp/image-config.json")" \
  --argjson env "$env" --argjson volumes "$volumes" --argjson seccomp "$seccomp" \
  --argjson extraArgs "$extra" --arg cgroupsPath "/$top/kubepods/pod$agent_uid/$container" \
  --arg hostname nodewarden-agent-test --argjson lowerOom "$lower_oom" \
  -f "$here/pod-to-oci.jq" "$tmp/umoci-config.json" >"$tmp/bundle/config.json" ||
  { echo "FAIL: pod-to-oci.jq" >&2; exit 1; }
echo "the agent's container: $(jq -c '{args: .process.args, user: .process.user, caps: .process.capabilities.bounding, noNewPrivileges: .process.noNewPrivileges, readonlyRoot: .root.readonly, seccomp: "\(.linux.seccomp.defaultAction), \(.linux.seccomp.syscalls | map(.names | length) | add) syscalls named", namespaces: [.linux.namespaces[].type]}' "$tmp/bundle/config.json")"
jq -r '.mounts[] | select(.type == "bind") | "  mount \(.destination) <- \(.source) (\(.options | join(",")))"' "$tmp/bundle/config.json"

# ---- run it -----------------------------------------------------------------------------
log=$tmp/agent.log
"$runtime" run --bundle "$tmp/bundle" "$cid" </dev/null >"$log" 2>&1 &
runner=$!
# Its PID (host PID namespace: the same number outside), for its network namespace.
pid=
for _ in $(seq 1 100); do
  pid=$("$runtime" state "$cid" 2>/dev/null | jq -r 'select(.status == "running") | .pid' 2>/dev/null)
  [ -n "$pid" ] && break
  kill -0 $runner 2>/dev/null || break
  sleep 0.1
done
if [ -z "$pid" ]; then
  cat "$log" >&2
  echo "FAIL: the agent's container did not start (the runtime's output above)" >&2
  exit 1
fi
get() { nsenter --net="/proc/$pid/ns/net" curl -sS -m 2 -o "$2" -w '%{http_code}' "http://127.0.0.1:$port$1" 2>/dev/null; }
# The startupProbe's budget: periodSeconds × failureThreshold.
budget=$(jq -r --arg c "$container" '.containers[] | select(.name == $c) | .startupProbe | (.periodSeconds // 10) * (.failureThreshold // 3)' "$tmp/podspec.json")
t0=$SECONDS ready=
while [ $((SECONDS - t0)) -lt "$budget" ] && kill -0 $runner 2>/dev/null; do
  [ "$(get /readyz "$tmp/readyz")" = 200 ] && { ready=$((SECONDS - t0)); break; }
  sleep 0.5
done
if [ -z "$ready" ]; then
  cat "$log" >&2
  fail "the agent was not ready within the startupProbe's ${budget} s (log above)"
  exit 1
fi
say "ready in ${ready} s: GET /readyz → 200 $(cat "$tmp/readyz")"
code=$(get /v1/state "$tmp/state.json")
[ "$code" = 200 ] || fail "GET /v1/state: $code"
jq -c '{node, ranking: .ranking.memory, allocatable: (.signals[] | select(.signal == "allocatableMemory.available") | {available, capacity})}' \
  "$tmp/state.json" || fail "/v1/state is not JSON: $(head -c 300 "$tmp/state.json")"
[ "$(jq -r .node "$tmp/state.json")" = "$node" ] || fail "/v1/state: node is not $node (the DaemonSet's NODE_NAME)"
for p in image-test/hog kube-system/nodewarden-agent-test; do
  jq -e --arg p "$p" '.ranking.memory | index($p)' "$tmp/state.json" >/dev/null || fail "/v1/state does not rank the pod $p"
done
# The sandbox's kubepods limit, read through the host cgroupfs mount.
[ "$(jq '.signals[] | select(.signal == "allocatableMemory.available") | .capacity' "$tmp/state.json")" = 1073741824 ] ||
  fail "/v1/state: allocatableMemory.available's capacity is not the sandbox's 1 GiB"
# What the kernel says the agent runs with: the DaemonSet's security context.
# The capability set the rendered DaemonSet adds ($caps, all others dropped), as the kernel
# prints it: one bit per capability number (linux/capability.h).
cap_bits=0
for cap in $(jq -r '.[]' <<<"$caps"); do
  case $cap in
    CAP_KILL) n=5 ;;
    CAP_SYS_NICE) n=23 ;;
    *) fail "the DaemonSet adds $cap, which this test does not know the number of: add it here" ;;
  esac
  cap_bits=$((cap_bits | (1 << n)))
done
caps_hex=$(printf '%016x' "$cap_bits")
for line in "CapEff:	$caps_hex" "CapPrm:	$caps_hex" "CapBnd:	$caps_hex" "CapInh:	0000000000000000" \
            "CapAmb:	0000000000000000" "NoNewPrivs:	1" "Seccomp:	2" "Uid:	0	0	0	0"; do
  grep -qxF "$line" "/proc/$pid/status" || fail "the agent's /proc/$pid/status has no '$line': $(grep "^${line%%:*}:" "/proc/$pid/status")"
done
echo "the agent's process: $(grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp):' "/proc/$pid/status" | tr -s '\t\n' '  ')"
# The loop thread's niceness, as the DaemonSet's --nice asks (SYS_NICE lets it be taken): the
# agent logs loop-priority with the niceness it runs at, or a warning with "wanted" if refused.
want_nice=$(jq -r --arg c "$container" '.containers[] | select(.name == $c) | .args[]? |
  select(startswith("--nice=")) | ltrimstr("--nice=")' "$tmp/podspec.json")
if [ -n "$want_nice" ]; then
  priority=$(grep '"event":"loop-priority"' "$log" | head -n 1)
  case $priority in
    *'"wanted"'*|'') fail "the agent's loop thread did not take --nice=$want_nice: ${priority:-no loop-priority line}" ;;
    *"\"nice\":$want_nice"[,}]*) echo "the agent's loop thread: nice $want_nice" ;;
    *) fail "the agent's loop-priority line does not say nice $want_nice: $priority" ;;
  esac
fi
# The loop thread under SCHED_FIFO, as the DaemonSet's --realtime asks (SYS_NICE). A kernel
# with realtime group scheduling gives a cgroup v1 cpu group that a runtime makes no realtime
# budget (cpu.rt_runtime_us 0): SCHED_FIFO is then refused with EPERM whatever the
# capabilities, and the agent warns once (loop-realtime) and runs on at its niceness, as
# docs/reference.md says. That refusal, and only where the agent's cpu group has no budget,
# is the expected one; any other is a failure.
want_rt=$(jq -r --arg c "$container" '.containers[] | select(.name == $c) | .args[]? |
  select(startswith("--realtime=")) | ltrimstr("--realtime=")' "$tmp/podspec.json")
rt_refusal_expected=
if [ -n "$want_rt" ] && [ "$want_rt" != 0 ]; then
  rt_line=$(grep '"event":"loop-realtime"' "$log" | head -n 1)
  cpu_group=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ { print $3 }' "/proc/$pid/cgroup")
  budget=
  for m in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do
    [ -n "$cpu_group" ] && [ -f "$m$cpu_group/cpu.rt_runtime_us" ] && budget=$(cat "$m$cpu_group/cpu.rt_runtime_us") && break
  done
  case $rt_line in
    *'"level":"warn"'*)
      [ "$budget" = 0 ] ||
        fail "the agent's loop thread was refused --realtime=$want_rt, with a realtime budget of '${budget:-none}' in its cpu group: $rt_line"
      rt_refusal_expected=1
      echo "the agent's loop thread: SCHED_FIFO refused as expected (cgroup v1 cpu group $cpu_group has cpu.rt_runtime_us 0); it runs at its niceness" ;;
    *'"level":"info"'*) echo "the agent's loop thread: SCHED_FIFO $want_rt" ;;
    *) fail "no loop-realtime line for --realtime=$want_rt" ;;
  esac
fi

# The eviction: the hog pod takes the sandbox node's allocatable memory below the soft
# threshold added above (and nowhere near a hard one); after the soft grace period the agent
# evicts it with SIGTERM, which a process of UID 65534 takes CAP_KILL to receive from root.
say "pressure: $(jq -c '{evictionSoft, evictionSoftGracePeriod}' "$tmp"/configmaps/*/policy.json); kubepods limit 1 GiB, the pod takes 800 MiB"
in_pod sh -c '{ head -c 800M /dev/zero; exec sleep 300; } | tail -n 1 >/dev/null'
hog=$!
t0=$SECONDS evicted=
while [ $((SECONDS - t0)) -lt 120 ] && kill -0 $runner 2>/dev/null; do
  if grep -q '"evicted"' "$log"; then evicted=$((SECONDS - t0)); break; fi
  grep -q '"eviction-failed"' "$log" && break
  sleep 0.5
done
grep '"event":"evict' "$log" | head -n 4
if [ -z "$evicted" ]; then
  grep '"eviction-failed"' "$log" | head -n 3 >&2
  fail "no eviction of image-test/hog within 120 s of the pressure"
else
  say "evicted ${evicted} s after the pressure began"
  for p in $sleeper $hog; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && fail "the hog pod's process $p (UID 65534) is still running"
  done
  grep '"evicted"' "$log" | grep -q 'image-test/hog' || fail "the eviction was not of image-test/hog"
fi
refusals=$(grep 'EPERM\|Operation not permitted' "$log")
[ -n "$rt_refusal_expected" ] && refusals=$(grep -v '"event":"loop-realtime"' <<<"$refusals")
if [ -n "$refusals" ]; then
  head -n 3 <<<"$refusals" >&2
  fail "the agent was refused something in its container (above)"
fi

# SIGTERM, as the kubelet stops it: a drain, exit 0 within terminationGracePeriodSeconds.
term=$(jq -r '.terminationGracePeriodSeconds // 30' "$tmp/podspec.json")
"$runtime" kill "$cid" TERM
t0=$SECONDS
while [ $((SECONDS - t0)) -lt "$term" ] && kill -0 $runner 2>/dev/null; do sleep 0.2; done
if kill -0 $runner 2>/dev/null; then
  fail "the agent did not stop within ${term} s of SIGTERM"
else
  wait $runner
  rc=$?
  [ $rc -eq 0 ] || { tail -n 20 "$log" >&2; fail "the agent's container exited with $rc after SIGTERM"; }
  say "stopped by SIGTERM in $((SECONDS - t0)) s, status $rc"
fi

[ "$status" -eq 0 ] && echo "PASS: the image, and the agent from it under $runtime as the DaemonSet runs it"
exit "$status"
