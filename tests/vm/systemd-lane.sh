#!/usr/bin/env bash
# systemd-lane.sh — the Debian package's unit proven under a real systemd: builds the .deb
# from BINARY (packaging/build-deb.sh), boots the VM with the host's systemd as PID 1
# (run-in-vm.sh --systemd) and runs tests/vm/systemd-unit.sh there on the package.
#
#   tests/vm/systemd-lane.sh [--cache DIR] [--timeout SECONDS] BINARY
#
# NODEWARDEN_VM_PURGE=1 also checks dpkg --purge (25-90 s more under TCG).
# Exit status: systemd-unit.sh's (0 pass, 1 fail, 77 skip), or run-in-vm.sh's own (124
# timeout, 125 the VM could not boot).
set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd -P)
cache=$REPO_ROOT/build/vm
timeout=420
while [ $# -gt 0 ]; do
  case $1 in
    --cache) cache=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    -*) echo "usage: tests/vm/systemd-lane.sh [--cache DIR] [--timeout SECONDS] BINARY" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: tests/vm/systemd-lane.sh [--cache DIR] [--timeout SECONDS] BINARY" >&2; exit 2; }
bin=$(readlink -f "$1")

# The package lives in the cache, which the guest sees (read-only) at the same path; the
# guest's /tmp is its own.
mkdir -p "$cache"
work=$(mktemp -d "$(cd "$cache" && pwd -P)/systemd-lane.XXXXXX")
trap 'rm -rf "$work"' EXIT
deb=$("$REPO_ROOT/packaging/build-deb.sh" --out "$work" "$bin") ||
  { echo "systemd-lane: packaging/build-deb.sh failed (see above)" >&2; exit 1; }
echo "systemd-lane: built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)" >&2
t0=$(date +%s)
rc=0
# The checkout is shared as well: the guest replaces /tmp, /run, … with its own, and a clone
# below one of them (CI's may be) would otherwise not be there for systemd-unit.sh.
VM_PASS_ENV="${VM_PASS_ENV:-} NODEWARDEN_VM_PURGE" "$SCRIPT_DIR/run-in-vm.sh" --systemd --cache "$cache" --memory 1024 --timeout "$timeout" \
  --writable "$(cd "$REPO_ROOT" && pwd -P)" --workdir / -- "$SCRIPT_DIR/systemd-unit.sh" "$deb" || rc=$?
echo "systemd-lane: exit status $rc after $(($(date +%s) - t0)) s" >&2
exit "$rc"
