#!/usr/bin/env bash
# fetch-peers.sh — fetch earlyoom and oomd (Debian packages) for bench/peers/run-peers.py
# without installing them: their packages would start daemons that kill processes on this
# host. The .debs are unpacked into build/peers/root; the binaries run from there (in the
# VM lane, which sees the host's files). Their shared libraries are already on a machine
# that builds nodewarden (checked with ldd). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/peers}
mkdir -p "$dir"
cd "$dir"
if [ ! -x root/usr/bin/earlyoom ] || [ ! -x root/usr/bin/oomd ]; then
  apt-get download earlyoom oomd >/dev/null 2>&1 || { apt-get update -qq && apt-get download earlyoom oomd; }
  for deb in earlyoom_*.deb oomd_*.deb; do dpkg-deb -x "$deb" root; done
fi
for binary in root/usr/bin/earlyoom root/usr/bin/oomd; do
  if ldd "$binary" | grep -q "not found"; then
    echo "fetch-peers: $binary needs libraries that are missing:" >&2
    ldd "$binary" | grep "not found" >&2
    exit 1
  fi
done
echo "fetch-peers: $(root/usr/bin/earlyoom -v 2>&1 | head -1); oomd $(root/usr/bin/oomd --version 2>&1 | head -1)"
