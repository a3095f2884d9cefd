# One container of a rendered pod template turned into an OCI runtime config, as the kubelet
# and containerd's CRI plugin build it (their defaults where the manifest says nothing), on top
# of the config.json that `umoci unpack` wrote for the image (root, default mounts, masked
# and read-only /proc paths). Input: umoci's config.json. Arguments (--argjson):
#   $pod        the pod template's spec (hostPID, containers, volumes, …)
#   $name       the container's name
#   $entrypoint the image's Entrypoint, $cmd its Cmd (arrays)
#   $env        the container's environment, resolved: [{name, value}] (fieldRefs done)
#   $volumes    {volume name: host directory} for every volume the container mounts
#   $seccomp    linux.seccomp for RuntimeDefault (seccomp.jq), or null
#   $extraArgs  {"replace": {flag: [new words]}, "drop": [flags with a value], "append": [...]}
#   $cgroupsPath, $hostname (strings)
#   $lowerOom   whether the runtime may lower oom_score_adj (Guaranteed QoS's -997)
# Anything the translation does not know (a volume type, a Localhost seccomp profile,
# privileged) stops it with an error rather than running something else.

# containerd's default capabilities of a container (pkg/cri/opts, oci.defaultUnixCaps).
def default_caps:
  ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
   "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
   "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"];
def capname: if startswith("CAP_") then . else "CAP_" + . end;

# Kubernetes quantities: "128Mi" → bytes, "200m" → millicores.
def bytes:
  capture("^(?<n>[0-9.]+)(?<u>[A-Za-z]*)$") as $q
  | ($q.n | tonumber) * ({"": 1, "k": 1000, "M": 1e6, "G": 1e9, "Ki": 1024, "Mi": 1048576,
                          "Gi": 1073741824}[$q.u] // error("quantity \($q.u)")) | floor;
def millicores:
  if endswith("m") then (.[:-1] | tonumber) else (tonumber * 1000) end;

# $(VAR) in command and args, from the container's environment (the kubelet's expansion).
def expand($vars):
  gsub("\\$\\((?<v>[A-Za-z_][A-Za-z0-9_]*)\\)"; $vars[.v] // "$(\(.v))");

($pod.containers[] | select(.name == $name)) as $c
| ($c.securityContext // {}) as $sc
| ($pod.securityContext // {}) as $psc
| (if $sc.privileged == true then error("privileged containers are not translated") else . end)
| ($env | map({(.name): .value}) | add // {}) as $vars
# Capabilities: the runtime's defaults, minus drop (ALL: every one), plus add.
| ((($sc.capabilities.drop // []) | map(capname)) as $drop
   | (($sc.capabilities.add // []) | map(capname)) as $add
   | (if ($drop | index("CAP_ALL")) then [] else default_caps - $drop end) + $add | unique) as $caps
| (($sc.runAsUser // $psc.runAsUser // .process.user.uid) ) as $uid
| (($sc.runAsGroup // $psc.runAsGroup // .process.user.gid) ) as $gid
| (($sc.seccompProfile // $psc.seccompProfile // {type: "RuntimeDefault"}).type) as $seccompType
# args: command replaces the Entrypoint, args the Cmd; then the test's substitutions.
| ((($c.command // $entrypoint) + ($c.args // (if $c.command then [] else $cmd end)))
   | map(expand($vars))) as $argv0
| ((reduce range(0; $argv0 | length) as $i ({out: [], skip: false};
     if .skip then .skip = false
     elif ($extraArgs.drop | index($argv0[$i])) then .skip = true
     elif $extraArgs.replace[$argv0[$i]] then
       .out += $extraArgs.replace[$argv0[$i]] | .skip = true
     else .out += [$argv0[$i]] end)) | .out + $extraArgs.append) as $argv
| .process = {
    terminal: false,
    user: ({uid: $uid, gid: $gid}
           + (if $psc.fsGroup then {additionalGids: [$psc.fsGroup]} else {} end)),
    args: $argv,
    env: ((.process.env | map(select(startswith("TERM=") | not)))
          + ($env | map("\(.name)=\(.value)")) + ["HOSTNAME=\($hostname)"]),
    cwd: ($c.workingDir // .process.cwd),
    capabilities: {bounding: $caps, effective: (if $uid == 0 then $caps else [] end),
                   permitted: (if $uid == 0 then $caps else [] end), inheritable: [], ambient: []},
    # allowPrivilegeEscalation defaults to true (no_new_privs unset).
    noNewPrivileges: ($sc.allowPrivilegeEscalation == false),
    # No rlimits: containerd sets none, the runtime's own are inherited.
  }
  # Guaranteed QoS (requests == limits, memory and CPU set): the kubelet's -997 (lowering it
  # takes CAP_SYS_RESOURCE, which $lowerOom says the caller has).
  + (if $lowerOom and ($c.resources.requests // {}) == ($c.resources.limits // {})
        and $c.resources.limits.memory != null and $c.resources.limits.cpu != null
     then {oomScoreAdj: -997} else {} end)
| .hostname = $hostname
| .root.readonly = ($sc.readOnlyRootFilesystem == true)
# Namespaces: the pod's own network, IPC and UTS; the host's PIDs with hostPID.
| .linux.namespaces = ([{type: "mount"}, {type: "network"}, {type: "ipc"}, {type: "uts"}]
                       + (if $pod.hostPID == true then [] else [{type: "pid"}] end))
| .linux.cgroupsPath = $cgroupsPath
| .linux.resources = {
    devices: [{allow: false, access: "rwm"},
              # containerd's default devices: null, zero, full, tty, random, urandom, ptmx,
              # pts.
              {allow: true, type: "c", major: 1, minor: 3, access: "rwm"},
              {allow: true, type: "c", major: 1, minor: 5, access: "rwm"},
              {allow: true, type: "c", major: 1, minor: 7, access: "rwm"},
              {allow: true, type: "c", major: 5, minor: 0, access: "rwm"},
              {allow: true, type: "c", major: 1, minor: 8, access: "rwm"},
              {allow: true, type: "c", major: 1, minor: 9, access: "rwm"},
              {allow: true, type: "c", major: 5, minor: 2, access: "rwm"},
              {allow: true, type: "c", major: 136, access: "rwm"}]
  }
  + (if $c.resources.limits.memory then {memory: {limit: ($c.resources.limits.memory | bytes)}} else {} end)
  + {cpu: ({shares: ((($c.resources.requests.cpu // "2m") | millicores) * 1024 / 1000 | floor | if . < 2 then 2 else . end)}
           + (if $c.resources.limits.cpu then {quota: (($c.resources.limits.cpu | millicores) * 100), period: 100000} else {} end))}
| .linux.seccomp = (
    if $seccompType == "RuntimeDefault" then ($seccomp // error("RuntimeDefault seccomp: no profile given"))
    elif $seccompType == "Unconfined" then null
    else error("seccompProfile type \($seccompType) is not translated") end)
| if .linux.seccomp == null then del(.linux.seccomp) else . end
# The volumes the container mounts: bind mounts of the host directories given. readOnly is
# not recursive (Kubernetes' default); mountPropagation maps as containerd maps it.
| .mounts += [
    $c.volumeMounts[]? as $m
    | ($pod.volumes[] | select(.name == $m.name)) as $v
    | (if $v.hostPath or $v.configMap or $v.emptyDir then .
       else error("volume \($v.name): only hostPath, configMap and emptyDir are translated") end)
    | {destination: $m.mountPath, type: "bind",
       source: ($volumes[$m.name] // error("no host directory for volume \($m.name)")),
       options: (["rbind",
                  ({"HostToContainer": "rslave", "Bidirectional": "rshared"}[$m.mountPropagation // ""]
                   // "rprivate"),
                  (if $m.readOnly then "ro" else "rw" end)]
                 + (if $v.configMap then ["nosuid", "nodev", "noexec"] else [] end))}
  ]
| .annotations = {"io.kubernetes.container.name": $name}
