#!/bin/sh
# The generated nodewarden.service: the settings the agent depends on are there, the ones
# that would break it are not, and `systemd-analyze verify` has nothing to say about it.
# Usage: verify_unit.sh UNIT NODEWARDEN_BINARY
# Exit 0 pass, 1 fail, 77 skip (systemd-analyze missing or unable to verify any unit here).
set -u
unit=$1
exe=$2
case $exe in /*) ;; *) exe=$(pwd)/$exe ;; esac
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

# Lines that must be present (extended regexps anchored at the start of a line).
for want in \
    '^Type=notify$' \
    '^NotifyAccess=main$' \
    '^WatchdogSec=[0-9]' \
    '^Restart=always$' \
    '^ReadWritePaths=(.* )?/sys/fs/cgroup( |$)' \
    '^ProtectSystem=strict$' \
    '^StateDirectory=nodewarden$' \
    '^OOMScoreAdjust=-1000$' \
    '^KillSignal=SIGTERM$' \
    '^ExecReload=/bin/kill -HUP \$MAINPID$' \
    '^ExecStart=/[^ ]*/nodewarden agent --policy /[^ ]*/nodewarden/policy\.json --realtime 1 \$NODEWARDEN_ARGS$' \
    '^EnvironmentFile=-/[^ ]*/default/nodewarden$' \
    '^CapabilityBoundingSet=(.* )?CAP_KILL( |$)' \
    '^CapabilityBoundingSet=(.* )?CAP_SYS_RESOURCE( |$)' \
    '^CapabilityBoundingSet=(.* )?CAP_SYS_NICE( |$)' \
    '^WantedBy=multi-user\.target$'; do
  grep -Eq "$want" "$unit" || fail "no line matches $want"
done
# Settings that would stop it from writing cgroups or seeing /proc/pressure and pods.
for unwanted in \
    '^ProtectControlGroups=(yes|true|on|1)' \
    '^ProtectKernelTunables=(yes|true|on|1)' \
    '^ProtectProc=(invisible|noaccess|ptraceable)' \
    '^ProcSubset=pid' \
    '^CapabilityBoundingSet=.*CAP_SYS_PTRACE' \
    '^RestrictAddressFamilies=.*AF_NETLINK' \
    '^RestrictRealtime=(yes|true|on|1)'; do
  if grep -Eq "$unwanted" "$unit"; then fail "unwanted setting: $(grep -E "$unwanted" "$unit")"; fi
done
if grep -En '@[A-Za-z_]+@' "$unit"; then fail "unsubstituted @variables@ above"; fi
[ -f "$exe" ] && [ -x "$exe" ] || fail "the built binary $exe is not an executable file"

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "SKIP: systemd-analyze is not installed (package systemd); only the greps ran" >&2
  [ "$status" -eq 0 ] && exit 77
  exit "$status"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/nodewarden-unit.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
case $tmp in
  *[!A-Za-z0-9/._-]*) echo "SKIP: temp dir $tmp needs quoting in a unit file" >&2; exit 77 ;;
esac
mkdir "$tmp/bin" "$tmp/probe" "$tmp/unit"
# verify checks that ExecStart's binary exists and is executable: point it at the build's.
ln -s "$exe" "$tmp/bin/nodewarden"

# Can systemd-analyze verify anything here? A trivial, known-good unit that owes nothing
# to this build must pass.
shell=$(command -v sh)
cat > "$tmp/probe/nodewarden-probe.service" <<PROBE
[Unit]
Description=probe

[Service]
ExecStart=$shell -c true
PROBE
if ! probe_out=$(systemd-analyze verify "$tmp/probe/nodewarden-probe.service" 2>&1); then
  echo "SKIP: systemd-analyze cannot verify even a trivial unit in this environment:" >&2
  printf '%s\n' "$probe_out" >&2
  [ "$status" -eq 0 ] && exit 77
  exit "$status"
fi

awk -v exe="$tmp/bin/nodewarden" '
  /^ExecStart=/ { sub(/^ExecStart=[^ ]*/, ""); print "ExecStart=" exe $0; next }
  { print }' "$unit" > "$tmp/unit/nodewarden.service"
echo "systemd-analyze verify (ExecStart rewritten to $exe):"
grep '^ExecStart=' "$tmp/unit/nodewarden.service"
out=$(systemd-analyze verify "$tmp/unit/nodewarden.service" 2>&1)
rc=$?
printf '%s\n' "${out:-(no output)}"
echo "exit status $rc"
[ "$rc" -eq 0 ] || fail "systemd-analyze verify exited with $rc"
if printf '%s\n' "$out" | grep -q 'nodewarden\.service'; then
  fail "systemd-analyze verify reported on the unit (lines above)"
fi

# For information only: the exposure score (not all systemd versions support --offline).
if score=$(systemd-analyze security --offline=yes "$tmp/unit/nodewarden.service" 2>/dev/null); then
  printf '%s\n' "$score" | tail -n 1
fi

[ "$status" -eq 0 ] && echo "PASS: $unit"
exit "$status"
