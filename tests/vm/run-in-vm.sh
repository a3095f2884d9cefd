#!/usr/bin/env bash
# run-in-vm.sh — run one command inside a throwaway VM on pure cgroup v2 (the "VM test lane").
#
#   tests/vm/run-in-vm.sh [--cache DIR] [--timeout SECONDS] [--memory MiB] [--cpus N] [--systemd]
#                         [--workdir DIR] [--writable DIR]... -- COMMAND [ARGS...]
#
# Boots Debian 12's own kernel (linux-image-amd64, fetched with apt-get download and unpacked
# into the cache, never installed) under qemu-system-x86_64 with TCG, with the host's / as a
# read-only virtio-9p root under a tmpfs overlay, cgroup2 alone at /sys/fs/cgroup (every
# controller enabled in the root) and PSI on. Each --writable DIR is its own writable 9p share
# mounted over the same path, so writes there land on the host. The command runs as root in
# --workdir (default: the current directory) with PATH, HOME=/root, LANG=C.UTF-8,
# NODEWARDEN_VM=1 and the variables named in VM_PASS_ENV (space-separated); its stdout and
# stderr come back on this script's stdout, "vm:" status lines go to stderr.
#
# --systemd boots the host's /lib/systemd/systemd as PID 1 on that root instead (journald,
# sysinit.target and basic.target, not the image's multi-user services) and runs the command
# as a oneshot service of it, in its own cgroup; systemctl, journalctl and dpkg's maintainer
# scripts then work as on a real machine. VM_BOOT_TIMEOUT (default 120 s) bounds the boot
# up to the command (exit 125 after it).
#
# Exit status: the command's own; 124 on timeout (default 1200 s); 125 if the VM could not be
# prepared or booted. VM_DEBUG=1 shows the boot (kernel messages, init's steps) on stderr.
# Other knobs: VM_ACCEL (default tcg,thread=multi), VM_KERNEL_PACKAGE (a versioned
# linux-image-* package), VM_APPEND (extra kernel arguments), VM_QUIET=1 (no status lines).
set -euo pipefail

SCRIPT_PATH=$(readlink -f "${BASH_SOURCE[0]}")
SCRIPT_DIR=${SCRIPT_PATH%/*}
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd -P)
GUEST_INIT=$SCRIPT_DIR/guest-init.sh
# What the initramfs loads, with their dependencies (read from each module's modinfo).
MODULES=(virtio_pci 9pnet_virtio 9p overlay)

say() { [ "${VM_QUIET:-0}" = 1 ] || printf 'vm: %s\n' "$*" >&2; }
err() { printf 'vm: error: %s\n' "$*" >&2; }
die() { err "$@"; exit 125; }

usage() {  # the command line from the header above; with "full", the whole header
  if [ "${1:-}" = full ]; then
    sed -n '2,/^set -euo/p' "$SCRIPT_PATH" | sed '$d; s/^# \{0,1\}//'
  else
    sed -n '4,5p' "$SCRIPT_PATH" | sed 's/^#   //'
  fi
}

# ---- arguments --------------------------------------------------------------------------
CACHE=$REPO_ROOT/build/vm
TIMEOUT=1200
MEMORY=3072
CPUS=2
WORKDIR=$PWD
WORKDIR_GIVEN=0
WRITABLE=()
SYSTEMD=0
while [ $# -gt 0 ]; do
  opt=$1
  case $opt in
    --) shift; break ;;
    -h|--help) usage full; exit 0 ;;
    --systemd) SYSTEMD=1; shift ;;
    --*=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}"; continue ;;
    --cache|--timeout|--memory|--cpus|--workdir|--writable)
      [ $# -ge 2 ] || die "$opt needs a value"
      case $opt in
        --cache) CACHE=$2 ;;
        --timeout) TIMEOUT=$2 ;;
        --memory) MEMORY=$2 ;;
        --cpus) CPUS=$2 ;;
        --workdir) WORKDIR=$2 WORKDIR_GIVEN=1 ;;
        --writable) WRITABLE+=("$2") ;;
      esac
      shift 2 ;;
    -*) usage >&2; die "unknown option $opt" ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { usage >&2; die "no command given (put it after --)"; }

is_uint() { [[ $1 =~ ^[0-9]+$ ]] && [ "$((10#$1))" -gt 0 ]; }
is_uint "$TIMEOUT" || die "--timeout must be a positive number of seconds, not '$TIMEOUT'"
if ! is_uint "$MEMORY" || [ "$((10#$MEMORY))" -lt 256 ]; then
  die "--memory must be at least 256 (MiB), not '$MEMORY'"
fi
is_uint "$CPUS" || die "--cpus must be a positive number, not '$CPUS'"
TIMEOUT=$((10#$TIMEOUT)) MEMORY=$((10#$MEMORY)) CPUS=$((10#$CPUS))

[ -d "$WORKDIR" ] || die "--workdir $WORKDIR is not a directory"
WORKDIR=$(cd "$WORKDIR" && pwd -P)

SHARES=()
for dir in "${WRITABLE[@]}"; do
  mkdir -p -- "$dir" || die "cannot create the writable directory $dir"
  dir=$(cd "$dir" && pwd -P)
  [ "$dir" != / ] || die "--writable / is not possible (the guest's root is an overlay)"
  SHARES+=("$dir")
done
# Parents before children, so a share inside another is mounted on top of it.
if [ ${#SHARES[@]} -gt 0 ]; then
  mapfile -t SHARES < <(printf '%s\n' "${SHARES[@]}" | awk '{ print length($0) "\t" $0 }' |
    sort -n -s -k1,1 | cut -f2- | awk '!seen[$0]++')
fi

# The guest has fresh tmpfs mounts on these; the host's copies are not visible there.
under() { [ "$1" = "$2" ] || [[ $1 == "$2"/* ]]; }
workdir_shared=0
for dir in "${SHARES[@]}"; do under "$WORKDIR" "$dir" && workdir_shared=1; done
if [ "$workdir_shared" = 0 ]; then
  for hidden in /tmp /run /dev /proc /sys; do
    under "$WORKDIR" "$hidden" || continue
    [ "$WORKDIR_GIVEN" = 0 ] ||
      die "--workdir $WORKDIR is under $hidden, which the guest replaces; pass --writable $WORKDIR (or a parent) to share it"
    say "the current directory $WORKDIR is under $hidden, which the guest replaces: running in / (share it with --writable)"
    WORKDIR=/
    break
  done
fi

# The guest's PATH is the caller's, and it sees the host's files at the same paths, so the
# command resolves here exactly as it would there. It is resolved here because the guest
# starts it with busybox env, which would prefer its own applets (sh, ls, ...) to a bare name.
GUEST_PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
cmd=$1
if [[ $cmd != */* ]]; then
  resolved=$(PATH=$GUEST_PATH type -P -- "$cmd") || { err "command not found: $cmd"; exit 127; }
  cmd=$resolved
fi
[[ ${cmd##*/} != *=* && $cmd != *=*/* ]] || die "the command's path must not contain '=': $cmd"
shift
CMD=("$cmd" "$@")

# ---- host tools -------------------------------------------------------------------------
QEMU=$(type -P qemu-system-x86_64) ||
  die "qemu-system-x86_64 not found: install the Debian package qemu-system-x86 (apt-get install qemu-system-x86)"
BUSYBOX=/bin/busybox
if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'; then
  die "a static busybox is needed for the initramfs: install the Debian package busybox-static"
fi
if [ "$SYSTEMD" = 1 ] && [ ! -x /lib/systemd/systemd ]; then
  die "--systemd boots the host's /lib/systemd/systemd, which is missing: install the Debian package systemd"
fi
BOOT_TIMEOUT=${VM_BOOT_TIMEOUT:-120}
is_uint "$BOOT_TIMEOUT" || die "VM_BOOT_TIMEOUT must be a positive number of seconds, not '$BOOT_TIMEOUT'"
for tool in apt-get apt-cache dpkg-deb timeout flock sha256sum; do
  type -P "$tool" >/dev/null || die "$tool not found (a Debian host is needed)"
done

mkdir -p -- "$CACHE" || die "cannot create the cache directory $CACHE"
CACHE=$(cd "$CACHE" && pwd -P)

# ---- run directory and cleanup ----------------------------------------------------------
RUN_DIR=
QEMU_PID=
BOOT_WATCH_PID=
# shellcheck disable=SC2317  # (called by the trap)
cleanup() {
  if [ -n "$BOOT_WATCH_PID" ]; then kill -TERM "$BOOT_WATCH_PID" 2>/dev/null || true; fi
  if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
    kill -TERM "$QEMU_PID" 2>/dev/null || true
    wait "$QEMU_PID" 2>/dev/null || true
  fi
  if [ -n "$RUN_DIR" ]; then rm -rf -- "$RUN_DIR"; fi
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE

# ---- kernel -----------------------------------------------------------------------------
# The kernel lives in $CACHE/kernel/<version>/ as vmlinuz and modules/ (lib/modules/<version>).
exec {LOCK_FD}>"$CACHE/.lock"
flock "$LOCK_FD"
# Leftovers of runs that were killed outright (SIGKILL leaves no chance to clean up).
find "$CACHE" -maxdepth 2 \( -name 'run.*' -o -name '.initramfs.*' -o -name '.download.*' \) \
  -mmin +1440 -exec rm -rf -- {} + 2>/dev/null || true

newest_cached_kernel() {
  local d
  while IFS= read -r d; do
    [ -f "$CACHE/kernel/$d/.complete" ] && { echo "$d"; return 0; }
  done < <(cd "$CACHE/kernel" 2>/dev/null && printf '%s\n' */ | sed 's,/$,,' | sort -V -r)
  return 1
}

fetch_kernel() {  # $1 = package name, $2 = version
  local pkg=$1 ver=$2 dl=$CACHE/kernel/.download.$$ deb
  rm -rf -- "$dl"
  mkdir -p -- "$dl"
  say "fetching $pkg (apt-get download, not installed)"
  if ! (cd "$dl" && apt-get download -q "$pkg") >"$dl.log" 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      say "download failed; running apt-get update"
      apt-get update -qq >>"$dl.log" 2>&1 || true
      (cd "$dl" && apt-get download -q "$pkg") >>"$dl.log" 2>&1 || { rm -rf -- "$dl"; return 1; }
    else
      rm -rf -- "$dl"
      return 1
    fi
  fi
  deb=$(ls "$dl"/*.deb)
  mkdir -p -- "$dl/x"
  dpkg-deb -x "$deb" "$dl/x" || { rm -rf -- "$dl"; return 1; }
  local tree=$CACHE/kernel/$ver moddir
  rm -rf -- "$tree"
  mkdir -p -- "$tree"
  mv -- "$dl/x/boot/vmlinuz-$ver" "$tree/vmlinuz" || { rm -rf -- "$dl" "$tree"; return 1; }
  mv -- "$dl/x/boot/config-$ver" "$tree/config" 2>/dev/null || true
  for moddir in "$dl/x/lib/modules/$ver" "$dl/x/usr/lib/modules/$ver"; do
    [ -d "$moddir" ] && mv -- "$moddir" "$tree/modules"
  done
  [ -d "$tree/modules" ] || { rm -rf -- "$dl" "$tree"; return 1; }
  echo "$pkg" >"$tree/package"
  touch "$tree/.complete"
  rm -rf -- "$dl" "$dl.log"
}

# linux-image-amd64 -> linux-image-<version>-amd64; apt-cache takes ~0.5 s, so the answer is
# kept until apt's lists change.
KPKG=${VM_KERNEL_PACKAGE:-}
RESOLVED=$CACHE/kernel/resolved
if [ -z "$KPKG" ] && [ -s "$RESOLVED" ] && ! [ /var/lib/apt/lists -nt "$RESOLVED" ]; then
  KPKG=$(cat "$RESOLVED")
fi
if [ -z "$KPKG" ]; then
  KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
    awk '$1 ~ /Depends:$/ && $2 ~ /^linux-image-[0-9]/ { print $2; exit }') || true
  if [ -n "$KPKG" ]; then mkdir -p "$CACHE/kernel" && echo "$KPKG" >"$RESOLVED"; fi
fi
KVER=
if [ -n "$KPKG" ]; then
  [[ $KPKG == linux-image-[0-9]* ]] || die "VM_KERNEL_PACKAGE must name a versioned linux-image-* package, not $KPKG"
  KVER=${KPKG#linux-image-}
  if [ ! -f "$CACHE/kernel/$KVER/.complete" ]; then
    if ! fetch_kernel "$KPKG" "$KVER"; then
      say "could not fetch $KPKG; log: $CACHE/kernel/.download.$$.log"
      KVER=$(newest_cached_kernel) || die "no kernel: apt-get download $KPKG failed (see $CACHE/kernel/.download.$$.log)"
      say "using the cached kernel $KVER instead"
    fi
  fi
else
  KVER=$(newest_cached_kernel) ||
    die "cannot resolve linux-image-amd64 (apt-cache depends linux-image-amd64 found nothing; run apt-get update as root)"
fi
KDIR=$CACHE/kernel/$KVER
# Keep only the kernel in use.
for d in "$CACHE"/kernel/*/; do
  [ "$(basename "$d")" = "$KVER" ] || rm -rf -- "$d"
done

# The bzImage's payload, uncompressed: qemu boots an ELF vmlinux through its PVH entry point,
# which skips the real-mode setup and the decompression (about 2 s under TCG).
extract_vmlinux() {
  local magic off out=$KDIR/vmlinux.tmp
  grep -q '^CONFIG_PVH=y' "$KDIR/config" 2>/dev/null || return 1
  for magic in '\xfd7zXZ\x00:xz -dc --single-stream' '\x28\xb5\x2f\xfd:zstd -qdc' '\x1f\x8b\x08:gzip -dc'; do
    # shellcheck disable=SC2013  # byte offsets, one a word
    for off in $(LC_ALL=C grep -obUaP "${magic%%:*}" "$KDIR/vmlinuz" 2>/dev/null | cut -d: -f1); do
      tail -c +$((off + 1)) "$KDIR/vmlinuz" | ${magic#*:} >"$out" 2>/dev/null || true
      if [ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then
        mv -- "$out" "$KDIR/vmlinux"
        return 0
      fi
    done
  done
  rm -f -- "$out"
  return 1
}
if [ ! -f "$KDIR/vmlinux" ] && [ ! -f "$KDIR/.no-vmlinux" ]; then
  extract_vmlinux || { touch "$KDIR/.no-vmlinux"; say "booting the compressed vmlinuz (no PVH vmlinux in it)"; }
fi
KIMAGE=$KDIR/vmlinux
[ -f "$KIMAGE" ] || KIMAGE=$KDIR/vmlinuz

# ---- initramfs --------------------------------------------------------------------------
# Rebuilt whenever this script, guest-init.sh, busybox or the kernel changes.
STAMP=$( { sha256sum "$SCRIPT_PATH" "$GUEST_INIT" "$BUSYBOX" | cut -d' ' -f1; echo "$KVER"; } |
  sha256sum | cut -d' ' -f1)
INITRAMFS=$CACHE/initramfs.cpio

module_path() {  # module name -> path of its file, relative to $KDIR/modules
  local name=${1//-/_}
  awk -v want="$name" '
    { f = $0; sub(/.*\//, "", f); sub(/\.ko(\.(xz|zst|gz))?$/, "", f); gsub(/-/, "_", f)
      if (f == want) { print; exit } }' "$KDIR/modules.list"
}

module_depends() {  # path of a module file -> its dependencies, one a line
  local file=$KDIR/modules/$1
  case $file in
    *.xz) xz -dc -- "$file" ;;
    *.zst) zstd -qdc -- "$file" ;;
    *.gz) gzip -dc -- "$file" ;;
    *) cat -- "$file" ;;
  esac | tr '\0' '\n' | sed -n 's/^depends=//p' | head -n 1 | tr ',' '\n' | sed '/^$/d'
}

build_initramfs() {
  local stage=$CACHE/.initramfs.$$ order=() seen=" " m
  rm -rf -- "$stage"
  mkdir -p -- "$stage"/{bin,dev,proc,sys,newroot,lib/modules}
  cp -- "$BUSYBOX" "$stage/bin/busybox"
  cp -- "$GUEST_INIT" "$stage/init"
  chmod 0755 "$stage/init" "$stage/bin/busybox"
  (cd "$KDIR/modules" && find kernel -name '*.ko*' | sort) >"$KDIR/modules.list"

  visit() {  # depth-first, dependencies first
    local name=${1//-/_} path dep
    case $seen in *" $name "*) return 0 ;; esac
    seen="$seen$name "
    path=$(module_path "$name")
    if [ -z "$path" ]; then
      grep -q "/${name}.ko\$\|/${1}.ko\$" "$KDIR/modules/modules.builtin" 2>/dev/null && return 0
      die "kernel module $1 not found in $KDIR/modules"
    fi
    for dep in $(module_depends "$path"); do visit "$dep"; done
    order+=("$path")
  }
  for m in "${MODULES[@]}"; do visit "$m"; done

  local path base
  for path in "${order[@]}"; do
    base=${path##*/}
    case $base in
      *.ko.xz) xz -dc -- "$KDIR/modules/$path" >"$stage/lib/modules/${base%.xz}"; base=${base%.xz} ;;
      *.ko.zst) zstd -qdc -- "$KDIR/modules/$path" >"$stage/lib/modules/${base%.zst}"; base=${base%.zst} ;;
      *.ko.gz) gzip -dc -- "$KDIR/modules/$path" >"$stage/lib/modules/${base%.gz}"; base=${base%.gz} ;;
      *) cp -- "$KDIR/modules/$path" "$stage/lib/modules/$base" ;;
    esac
    echo "$base" >>"$stage/lib/modules/order"
  done
  # Uncompressed: unpacking is a copy, which is faster under TCG than inflating.
  (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | "$BUSYBOX" cpio -o -H newc -R 0:0) \
    >"$INITRAMFS.tmp" 2>/dev/null || { rm -rf -- "$stage"; die "cannot build the initramfs"; }
  mv -- "$INITRAMFS.tmp" "$INITRAMFS"
  echo "$STAMP" >"$INITRAMFS.stamp"
  say "initramfs rebuilt (kernel $KVER, modules: $(tr '\n' ' ' <"$stage/lib/modules/order"))"
  rm -rf -- "$stage"
}

if [ ! -f "$INITRAMFS" ] || [ "$(cat "$INITRAMFS.stamp" 2>/dev/null)" != "$STAMP" ]; then
  build_initramfs
fi
flock -u "$LOCK_FD"
exec {LOCK_FD}>&-

# ---- this run's job ---------------------------------------------------------------------
RUN_DIR=$(mktemp -d "$CACHE/run.XXXXXX")
NONCE=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
DEBUG=${VM_DEBUG:-0}
[ "$DEBUG" = 1 ] || DEBUG=0

q() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }

ENVS=("PATH=$GUEST_PATH" "HOME=/root" "LANG=C.UTF-8" "NODEWARDEN_VM=1")
for name in ${VM_PASS_ENV:-}; do
  [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "VM_PASS_ENV: '$name' is not a variable name"
  case $name in PATH|HOME|LANG|NODEWARDEN_VM) continue ;; esac
  [ -n "${!name+set}" ] && ENVS+=("$name=${!name}")
done

mkdir -p "$RUN_DIR/job"
{
  echo "VM_NONCE=$NONCE"
  echo "VM_DEBUG=$DEBUG"
  echo "VM_SYSTEMD=$SYSTEMD"
  echo "VM_WORKDIR=$(q "$WORKDIR")"
  echo "VM_SHARES=${#SHARES[@]}"
  i=0
  for dir in "${SHARES[@]}"; do echo "VM_SHARE_$i=$(q "$dir")"; i=$((i + 1)); done
  # shellcheck disable=SC2016  # $BB is the guest's
  printf 'vm_run() {\n  exec "$BB" env -i'
  for a in "${ENVS[@]}" "${CMD[@]}"; do printf ' %s' "$(q "$a")"; done
  printf '\n}\n'
} >"$RUN_DIR/job/job.sh"
(cd "$RUN_DIR/job" && echo job.sh | "$BUSYBOX" cpio -o -H newc -R 0:0) >"$RUN_DIR/job.cpio" 2>/dev/null ||
  die "cannot build the job archive"
cat "$INITRAMFS" "$RUN_DIR/job.cpio" >"$RUN_DIR/initrd"

# ---- qemu -------------------------------------------------------------------------------
qopt() { printf '%s' "${1//,/,,}"; }  # qemu option values double their commas

APPEND="console=ttyS0 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1 psi=1 panic=-1 mitigations=off"
if [ "$DEBUG" = 1 ]; then APPEND+=" loglevel=7"; else APPEND+=" quiet loglevel=1"; fi
if [ "$SYSTEMD" = 1 ]; then
  # Straight to the command's target; no status lines on the console unless debugging.
  APPEND+=" systemd.unit=nodewarden-vm.target"
  if [ "$DEBUG" = 1 ]; then APPEND+=" systemd.show_status=1 systemd.log_level=info"; else APPEND+=" systemd.show_status=0"; fi
fi
APPEND+=${VM_APPEND:+ $VM_APPEND}

# shellcheck disable=SC2054  # the commas are qemu's
QARGS=(-nodefaults -no-user-config -display none -monitor none -no-reboot
  -machine pc -accel "${VM_ACCEL:-tcg,thread=multi}" -cpu max -smp "$CPUS" -m "$MEMORY"
  -kernel "$KIMAGE" -initrd "$RUN_DIR/initrd" -append "$APPEND"
  -chardev stdio,id=con0,signal=off -serial chardev:con0
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap")
i=0
for dir in "${SHARES[@]}"; do
  QARGS+=(-virtfs "local,path=$(qopt "$dir"),mount_tag=w$i,security_model=none,multidevs=remap")
  i=$((i + 1))
done

shown=${CMD[*]}
shown=${shown%%$'\n'*}
[ ${#shown} -le 100 ] || shown="${shown:0:100}..."
say "booting $KVER (${CPUS} cpus, ${MEMORY} MiB, ${VM_ACCEL:-tcg}) for: $shown"
T0=$EPOCHREALTIME
exec {QFD}< <(exec timeout -k 10 "$TIMEOUT" "$QEMU" "${QARGS[@]}" </dev/null 2>"$RUN_DIR/qemu.err")
QEMU_PID=$!
if [ "$SYSTEMD" = 1 ]; then
  # systemd's boot has no marker of its own: bound it here. qemu is stopped if the command has
  # not started after VM_BOOT_TIMEOUT seconds.
  (
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
    sleep "$BOOT_TIMEOUT" & s=$!
    wait "$s"
    [ -e "$RUN_DIR/started" ] || { touch "$RUN_DIR/boot-timeout"; kill -TERM "$QEMU_PID" 2>/dev/null; }
  ) &
  BOOT_WATCH_PID=$!
fi

elapsed() {  # seconds from $1 to $2 ($EPOCHREALTIME values), $3 decimals (default 1)
  local a=${1/[.,]/} b=${2/[.,]/} d=${3:-1} ms
  ms=$(( (10#$b - 10#$a) / 1000 ))
  if [ "$d" = 2 ]; then printf '%d.%02d' $((ms / 1000)) $((ms % 1000 / 10)); else printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); fi
}

state=boot rc='' fail_reason='' held=0 t_start=''
while IFS= read -r -u "$QFD" line || [ -n "$line" ]; do
  line=${line%$'\r'}
  case $state in
    boot)
      case $line in
        "@@VM-START-$NONCE@@") state=run; t_start=$EPOCHREALTIME; : >"$RUN_DIR/started" ;;
        "@@VM-FAIL-$NONCE@@ "*) fail_reason=${line#* } ;;
        *)
          printf '%s\n' "$line" >>"$RUN_DIR/boot.log"
          [ "$DEBUG" = 0 ] || printf 'vm: %6s| %s\n' "$(elapsed "$T0" "$EPOCHREALTIME" 2)" "$line" >&2 ;;
      esac ;;
    run)
      if [[ $line == "@@VM-EXIT-$NONCE@@ "* ]]; then
        # The guest has synced the writable shares before this line: no need to wait for
        # its power-off.
        rc=${line##* }
        state=finished
        break
      fi
      # The guest prints a newline before the exit marker; hold one empty line back to drop it.
      if [ "$held" = 1 ]; then printf '\n'; held=0; fi
      if [ -z "$line" ]; then held=1; else printf '%s\n' "$line"; fi ;;
  esac
done
qstatus=0
if [ "$state" = finished ]; then
  kill -TERM "$QEMU_PID" 2>/dev/null || true
  wait "$QEMU_PID" 2>/dev/null || true
else
  wait "$QEMU_PID" 2>/dev/null || qstatus=$?
fi
exec {QFD}<&-
QEMU_PID=
T1=$EPOCHREALTIME

show_boot_log() {
  if [ -s "$RUN_DIR/qemu.err" ]; then sed 's/^/vm: qemu: /' "$RUN_DIR/qemu.err" | tail -n 20 >&2; fi
  if [ "$DEBUG" = 0 ] && [ -s "$RUN_DIR/boot.log" ]; then
    sed 's/^/vm: console: /' "$RUN_DIR/boot.log" | tail -n 30 >&2
  fi
}

if [ "$DEBUG" = 1 ] && [ -s "$RUN_DIR/qemu.err" ]; then sed 's/^/vm: qemu: /' "$RUN_DIR/qemu.err" >&2; fi
if [ "$state" = finished ] && [[ $rc =~ ^[0-9]+$ ]]; then
  say "exit status $rc (boot $(elapsed "$T0" "$t_start") s, total $(elapsed "$T0" "$T1") s)"
  exit "$rc"
fi
if [ -n "$BOOT_WATCH_PID" ]; then
  kill -TERM "$BOOT_WATCH_PID" 2>/dev/null || true
  wait "$BOOT_WATCH_PID" 2>/dev/null || true
  BOOT_WATCH_PID=
fi
if [ -e "$RUN_DIR/boot-timeout" ]; then
  err "systemd did not start the command within $BOOT_TIMEOUT s (VM_BOOT_TIMEOUT); qemu was stopped"
  show_boot_log
  exit 125
fi
if [ "$qstatus" = 124 ] || [ "$qstatus" = 137 ]; then
  err "timed out after $TIMEOUT s (--timeout); qemu was killed"
  [ "$state" != boot ] || show_boot_log
  exit 124
fi
if [ -n "$fail_reason" ]; then
  err "the guest could not run the command: $fail_reason"
  show_boot_log
  exit 125
fi
if [ "$state" = boot ]; then
  err "the VM did not boot (qemu exit status $qstatus); run with VM_DEBUG=1 to see the boot"
  show_boot_log
  exit 125
fi
err "the VM stopped before the command reported its exit status (kernel panic or qemu failure; qemu exit status $qstatus)"
if [ -s "$RUN_DIR/qemu.err" ]; then sed 's/^/vm: qemu: /' "$RUN_DIR/qemu.err" | tail -n 20 >&2; fi
exit 125
