#!/usr/bin/env bash
# build-deb.sh — the Debian package of nodewarden, from a built binary and this source tree.
#
#   packaging/build-deb.sh [--out DIR] [--revision N] [--no-strip] BINARY
#
# Writes DIR/nodewarden_<version>-<revision>_<arch>.deb (DIR: the current directory; revision
# 1) with dpkg-deb and prints its path. <version> is what `BINARY version` prints. The
# package's layout is Debian's whatever prefix the build was configured with: /usr/bin,
# /etc, the unit in systemd's system unit directory; the unit and the EnvironmentFile are
# made from systemd/ here with those paths, as meson's configure_file does.
#
#   /usr/bin/nodewarden, /usr/bin/kubectl-nodewarden -> nodewarden  (kubectl plugin)
#   /lib/systemd/system/nodewarden.service     Type=notify, enabled and started on install
#   /etc/nodewarden/policy.json                conffile: the default policy
#   /etc/default/nodewarden                    conffile: NODEWARDEN_ARGS, NODE_NAME
#   /etc/nodewarden/pods.d/                    the unit's default pod source (empty)
#   /usr/share/man/man1/nodewarden.1.gz        generated from --help (packaging/from-help.sh)
#   /usr/share/bash-completion/completions/{nodewarden,kubectl-nodewarden}
#   /usr/share/doc/nodewarden/                 README.md (the unit's Documentation=),
#                                              copyright, changelog.Debian.gz
#
# Depends: from dpkg-shlibdeps (dpkg-dev) on the binary, else from the packages owning the
# libraries ldd lists. The maintainer scripts do what debhelper's dh_installsystemd would:
# enable and start the unit on install, restart it on upgrade, stop it on removal, forget it
# on purge; each step only where systemd and init-system-helpers are present.
# Environment: DEB_MAINTAINER ("Name <email>"), SOURCE_DATE_EPOCH (default: the last
# commit's time, else now) for reproducible dates.
set -Eeuo pipefail
export LC_ALL=C.UTF-8
trap 'echo "build-deb.sh: line $LINENO: \"$BASH_COMMAND\" failed" >&2' ERR

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SRC=$(cd "$SCRIPT_DIR/.." && pwd -P)

out=. revision=1 strip=1
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --revision) revision=$2; shift 2 ;;
    --no-strip) strip=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build-deb.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: packaging/build-deb.sh [--out DIR] [--revision N] [--no-strip] BINARY" >&2; exit 2; }
bin=$1
[ -x "$bin" ] || { echo "build-deb.sh: $bin is not an executable" >&2; exit 1; }
for tool in dpkg-deb dpkg gzip; do
  command -v "$tool" >/dev/null || { echo "build-deb.sh: $tool not found (a Debian host is needed)" >&2; exit 1; }
done

upstream=$("$bin" version | awk 'NR == 1 { print $2 }')
[[ $upstream =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || { echo "build-deb.sh: '$bin version' gave no version" >&2; exit 1; }
version=$upstream-$revision
arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:-nodewarden maintainers <maintainers@users.noreply.a-seed-d689456b.example>}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$SRC" log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || true)
[ -n "$unitdir" ] || unitdir=/lib/systemd/system
docdir=/usr/share/doc/nodewarden

mkdir -p "$out"
out=$(cd "$out" && pwd -P)
stage=$(mktemp -d "${TMPDIR:-/tmp}/nodewarden-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/root
umask 022

# ---- files ---------------------------------------------------------------------------------
install -d "$root/usr/bin" "$root$unitdir" "$root/etc/nodewarden/pods.d" "$root/etc/default" \
  "$root$docdir" "$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions" \
  "$root/DEBIAN"
install -m 0755 "$bin" "$root/usr/bin/nodewarden"
if [ "$strip" = 1 ]; then
  # As dh_strip does (without a -dbgsym package).
  strip --remove-section=.comment --remove-section=.note --strip-unneeded "$root/usr/bin/nodewarden"
fi
ln -s nodewarden "$root/usr/bin/kubectl-nodewarden"

substitute() {  # the @...@ of systemd/*.in, with the package's paths
  sed -e "s|@bindir@|/usr/bin|g" -e "s|@sysconfdir@|/etc|g" -e "s|@docdir@|$docdir|g" "$1"
}
# The unit's header speaks of a meson install; the package's own facts replace those lines.
substitute "$SRC/systemd/nodewarden.service.in" | awk '
  /^# systemd\/nodewarden.service.in by meson/ { print "# systemd/nodewarden.service.in by packaging/build-deb.sh for the Debian package)."; next }
  /^# Install and enable:/ { print "# Installed, enabled and started by the nodewarden package (dpkg -i)."; skip = 1; next }
  skip { skip = 0; if ($0 ~ /^#  +systemctl enable/) next }
  /^# Configure: .*\(see the example in$/ { print "# Configure:           /etc/default/nodewarden (a conffile), or `systemctl edit nodewarden`"; drop = 1; next }
  drop { drop = 0; if ($0 ~ /nodewarden\.env\), or `systemctl edit nodewarden`$/) next }
  { print }' >"$root$unitdir/nodewarden.service"
grep -q '^ExecStart=/usr/bin/nodewarden agent ' "$root$unitdir/nodewarden.service" ||
  { echo "build-deb.sh: the unit lost its ExecStart" >&2; exit 1; }
chmod 0644 "$root$unitdir/nodewarden.service"
install -m 0644 "$SRC/systemd/nodewarden-policy.json" "$root/etc/nodewarden/policy.json"
# The EnvironmentFile, as a conffile: systemd/nodewarden.env (an example to copy, for a
# meson install) with a header saying what it is here.
{
  cat <<'EOF'
# nodewarden's settings for its systemd unit (a conffile of the nodewarden package: dpkg
# keeps your edits on upgrade and asks before replacing them). After an edit:
# `systemctl restart nodewarden`. Everything below is commented out: the unit's built-in
# defaults apply. nodewarden(1) and /usr/share/doc/nodewarden/README.md describe each option.
#
EOF
  substitute "$SRC/systemd/nodewarden.env" | sed '1,/^#$/d'
} >"$root/etc/default/nodewarden"
chmod 0644 "$root/etc/default/nodewarden"
grep -q '^#NODEWARDEN_ARGS=' "$root/etc/default/nodewarden" ||
  { echo "build-deb.sh: systemd/nodewarden.env changed shape: no #NODEWARDEN_ARGS= line" >&2; exit 1; }

date_man=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
"$SCRIPT_DIR/from-help.sh" man "$bin" "$upstream" "$date_man" >"$stage/nodewarden.1"
gzip -9n <"$stage/nodewarden.1" >"$root/usr/share/man/man1/nodewarden.1.gz"
ln -s nodewarden.1.gz "$root/usr/share/man/man1/kubectl-nodewarden.1.gz"
"$SCRIPT_DIR/from-help.sh" completion "$bin" >"$root/usr/share/bash-completion/completions/nodewarden"
ln -s nodewarden "$root/usr/share/bash-completion/completions/kubectl-nodewarden"

install -m 0644 "$SRC/README.md" "$root$docdir/README.md"
# The manual the README links to, beside it as in the source (README.md → docs/…).
install -d -m 0755 "$root$docdir/docs"
install -m 0644 "$SRC"/docs/*.md "$SRC"/docs/*.svg "$root$docdir/docs/"
cat >"$root$docdir/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: nodewarden
Upstream-Contact: $maintainer

Files: *
Copyright: $(date -u -d "@$SOURCE_DATE_EPOCH" +%Y) nodewarden developers
License: Apache-2.0

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License");
 you may not use this file except in compliance with the License.
 You may obtain a copy of the License at
 .
     http://www.apache.org/licenses/LICENSE-2.0
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an "AS IS" BASIS,
 WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 See the License for the specific language governing permissions and
 limitations under the License.
 .
 On Debian systems, the complete text of the Apache License, Version 2.0
 can be found in "/usr/share/common-licenses/Apache-2.0".
EOF
{
  echo "nodewarden ($version) unstable; urgency=medium"
  echo
  echo "  * Package built from the nodewarden source tree by packaging/build-deb.sh."
  echo
  echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$root$docdir/changelog.Debian.gz"

# ---- dependencies --------------------------------------------------------------------------
# dpkg-shlibdeps (dpkg-dev) when it works; else the same rule by hand: each library the binary
# names (DT_NEEDED) maps to the dependency its package declares in its shlibs file.
depends=
if command -v dpkg-shlibdeps >/dev/null; then
  # dpkg-shlibdeps wants to run at the top of a source package: give it a minimal one.
  mkdir -p "$stage/src/debian"
  printf 'Source: nodewarden\n\nPackage: nodewarden\nArchitecture: any\n' >"$stage/src/debian/control"
  depends=$(cd "$stage/src" && dpkg-shlibdeps -O -e"$root/usr/bin/nodewarden" 2>"$stage/shlibdeps.log" |
    sed -n 's/^shlibs:Depends=//p') || depends=
  if [ -z "$depends" ]; then
    echo "build-deb.sh: dpkg-shlibdeps failed ($(head -n 1 "$stage/shlibdeps.log")); reading the shlibs files instead" >&2
  fi
fi
if [ -z "$depends" ]; then
  needed=$(LC_ALL=C readelf -d "$root/usr/bin/nodewarden" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  [ -n "$needed" ] || { echo "build-deb.sh: readelf found no NEEDED libraries" >&2; exit 1; }
  for soname in $needed; do
    # libfoo.so.3 -> "libfoo 3"; libfoo-1.2.so -> "libfoo 1.2"
    if [[ $soname =~ ^(.*)\.so\.([0-9.]+)$ ]]; then name=${BASH_REMATCH[1]} ver=${BASH_REMATCH[2]}
    elif [[ $soname =~ ^(.*)-([0-9.]+)\.so$ ]]; then name=${BASH_REMATCH[1]} ver=${BASH_REMATCH[2]}
    else echo "build-deb.sh: cannot parse the soname $soname" >&2; exit 1; fi
    dep=$(cat /var/lib/dpkg/info/*.shlibs 2>/dev/null |
      awk -v n="$name" -v v="$ver" '!found && $1 !~ /:$/ && $1 == n && $2 == v { found = 1; $1 = ""; $2 = ""; sub(/^ +/, ""); print }')
    [ -n "$dep" ] || { echo "build-deb.sh: no shlibs entry for $soname" >&2; exit 1; }
    depends+="${depends:+, }$dep"
  done
  depends=$(printf '%s\n' "$depends" | sed 's/, /\n/g' | sort -u | paste -sd, | sed 's/,/, /g')
fi
[ -n "$depends" ] || { echo "build-deb.sh: found no shared library dependencies" >&2; exit 1; }

# ---- control files -------------------------------------------------------------------------
installed_size=$(du -sk --apparent-size --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<EOF
Package: nodewarden
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $depends
Section: admin
Priority: optional
Description: Kubernetes node agent that evicts pods before the OOM killer
 nodewarden watches a node's pod cgroups (cgroup v2 or v1), memory pressure
 (PSI) and the kubelet's eviction signals, and evicts pods in the kubelet's
 order before the kernel's OOM killer has to act. The package runs the agent
 as a systemd service (Type=notify, with a watchdog) that reads
 /etc/nodewarden/policy.json and /etc/default/nodewarden.
 .
 The same binary answers what-if questions offline (nodewarden explain),
 checks policies, shows a running agent's state, serves a binding admission
 webhook, and works as a kubectl plugin (kubectl nodewarden).
EOF
printf '/etc/default/nodewarden\n/etc/nodewarden/policy.json\n' >"$root/DEBIAN/conffiles"

# The maintainer scripts: dh_installsystemd's behaviour (enable on first install, keep the
# admin's choice on upgrade, start or restart where systemd runs; stop on removal; mask on
# removal and forget on purge), written out.
cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e

case "$1" in
  configure|abort-upgrade|abort-deconfigure|abort-remove)
    if command -v deb-systemd-helper >/dev/null 2>&1; then
      # Drop a mask left by the removal of an earlier version.
      deb-systemd-helper unmask nodewarden.service >/dev/null || true
      if deb-systemd-helper --quiet was-enabled nodewarden.service; then
        # A first install, or an upgrade of an enabled unit: (re)create its links.
        deb-systemd-helper enable nodewarden.service >/dev/null || true
      else
        # Disabled by the admin: only record the state for purge.
        deb-systemd-helper update-state nodewarden.service >/dev/null || true
      fi
    fi
    if [ -d /run/systemd/system ]; then
      systemctl --system daemon-reload >/dev/null || true
      if [ -n "$2" ]; then action=restart; else action=start; fi
      if command -v deb-systemd-invoke >/dev/null 2>&1; then
        deb-systemd-invoke "$action" nodewarden.service >/dev/null || true
      fi
    fi
    ;;
esac

exit 0
EOF
cat >"$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e

# On upgrade the unit keeps running: postinst restarts it with the new binary.
if [ "$1" = remove ] && [ -d /run/systemd/system ] && command -v deb-systemd-invoke >/dev/null 2>&1; then
  deb-systemd-invoke stop nodewarden.service >/dev/null || true
fi

exit 0
EOF
cat >"$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e

if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl --system daemon-reload >/dev/null || true
fi
if command -v deb-systemd-helper >/dev/null 2>&1; then
  case "$1" in
    remove)
      # Keep a removed-but-not-purged unit from being started by a leftover link.
      deb-systemd-helper mask nodewarden.service >/dev/null || true
      ;;
    purge)
      deb-systemd-helper purge nodewarden.service >/dev/null || true
      deb-systemd-helper unmask nodewarden.service >/dev/null || true
      ;;
  esac
fi

exit 0
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
  xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"

# Same timestamps everywhere: the same inputs give the same .deb.
find "$root" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

deb=$out/nodewarden_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
