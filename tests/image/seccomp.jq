# A seccomp profile in the containers/common format (Debian's golang-github-containers-common
# ships /usr/share/containers/seccomp.json: CRI-O's and Podman's default, what CRI-O runs for
# `seccompProfile: {type: RuntimeDefault}`) turned into the OCI runtime spec's linux.seccomp
# for one container, as containers/common's LoadProfile does: rules included only for this
# architecture, for the container's capabilities and for this kernel.
#
#   jq --arg arch amd64 --argjson caps '["CAP_KILL"]' --arg kernel 6.1 -f seccomp.jq seccomp.json
def scmp_arch:
  {"amd64": "SCMP_ARCH_X86_64", "arm64": "SCMP_ARCH_AARCH64", "386": "SCMP_ARCH_X86",
   "ppc64el": "SCMP_ARCH_PPC64LE", "s390x": "SCMP_ARCH_S390X", "armhf": "SCMP_ARCH_ARM",
   "riscv64": "SCMP_ARCH_RISCV64"}[.];
# The profile's arch names (Go's GOARCH) for a Debian architecture.
def go_arch:
  {"amd64": "amd64", "arm64": "arm64", "i386": "386", "ppc64el": "ppc64le", "s390x": "s390x",
   "armhf": "arm", "riscv64": "riscv64"}[.] // .;
# "6.1" >= "5.8"?
def version_ge($want):
  (split(".") | map(tonumber? // 0)) as $have
  | ($want | split(".") | map(tonumber? // 0)) as $w
  | $have >= $w;

($arch | go_arch) as $goarch
| ($arch | scmp_arch) as $native
| .defaultAction as $default
| {
    defaultAction: $default,
    architectures: ([$native] + ([.archMap[]? | select(.architecture == $native) | .subArchitectures[]?])),
    syscalls: [
      .syscalls[]
      | select((.includes.arches // []) as $a | ($a | length) == 0 or ($a | index($goarch)))
      | select((.excludes.arches // []) as $a | ($a | index($goarch)) | not)
      | select((.includes.caps // []) as $c | all($c[]; . as $x | $caps | index($x)))
      | select((.excludes.caps // []) as $c | any($c[]; . as $x | $caps | index($x)) | not)
      | select((.includes.minKernel // "") as $k | $k == "" or ($kernel | version_ge($k)))
      | {names, action}
        + (if .errnoRet != null then {errnoRet} else {} end)
        + (if (.args // []) | length > 0 then {args} else {} end)
    ]
  }
+ (if .defaultErrnoRet != null then {defaultErrnoRet} else {} end)
