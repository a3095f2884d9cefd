#!/usr/bin/env bash
# fetch-peers.sh — fetch earlyoom, oomd and systemd-oomd (Debian packages) for
# bench/peers/run-peers.py without installing them: their packages would start daemons that
# kill processes on this host. The .debs are unpacked into build/peers/root; the binaries run
# from there (in the VM lane, which sees the host's files). Their shared libraries are already
# on a machine that builds nodewarden (checked with ldd); systemd-oomd uses systemd's private
# libsystemd-shared, so its package must be the host systemd's own version. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/peers}
mkdir -p "$dir"
cd "$dir"
host_systemd=$(dpkg-query -W -f='${Version}' systemd 2>/dev/null || true)
[ -n "$host_systemd" ] || { echo "fetch-peers: systemd is not installed on this host" >&2; exit 1; }
oomd_deb=systemd-oomd_${host_systemd//:/%3a}_amd64.deb
if [ ! -x root/usr/bin/earlyoom ] || [ ! -x root/usr/bin/oomd ] || [ ! -f "$oomd_deb" ] ||
   [ ! -x root/lib/systemd/systemd-oomd ]; then
  rm -f systemd-oomd_*.deb
  pkgs=(earlyoom oomd "systemd-oomd=$host_systemd")
  apt-get download "${pkgs[@]}" >/dev/null 2>&1 || { apt-get update -qq && apt-get download "${pkgs[@]}"; }
  for deb in earlyoom_*.deb oomd_*.deb systemd-oomd_*.deb; do dpkg-deb -x "$deb" root; done
fi
for binary in root/usr/bin/earlyoom root/usr/bin/oomd root/lib/systemd/systemd-oomd; do
  if ldd "$binary" | grep -q "not found"; then
    echo "fetch-peers: $binary needs libraries that are missing:" >&2
    ldd "$binary" | grep "not found" >&2
    exit 1
  fi
done
echo "fetch-peers: $(root/usr/bin/earlyoom -v 2>&1 | head -1); oomd $(root/usr/bin/oomd --version 2>&1 | head -1);" \
  "systemd-oomd $(root/lib/systemd/systemd-oomd --version 2>&1 | head -1)"
