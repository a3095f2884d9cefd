#!/usr/bin/env bash
# build-image.sh — nodewarden's container image from the Debian package, with no registry:
# a Debian root made by debootstrap from apt's mirror, the package installed into it with apt,
# written as an OCI image layout by umoci.
#
#   packaging/build-image.sh [--out DIR] [--cache DIR] [--name NAME] [--tag TAG] DEB
#
# Writes DIR/NAME-image/ (an OCI image layout holding the tag TAG) and the same layout as one
# archive, DIR/NAME_TAG_ARCH.oci.tar, and prints the archive's path. DIR: the current
# directory. NAME: nodewarden, as systemd/kubernetes/'s DaemonSet and Deployment name the
# image; TAG: the package's upstream version (what the kustomization's `images:` entry tags).
#
# The image has two layers:
#   1. the base, cached in CACHE/base-CODENAME-ARCH/ (default ~/.cache/nodewarden/image) and
#      made once per machine: `debootstrap --variant=minbase` of this host's Debian release
#      from the mirror apt uses here (`apt-get indextargets`), with that mirror's updates and
#      security suites in its sources, upgraded, and slimmed as Debian's -slim images are
#      (no /usr/share/doc except the copyright files, no man pages, info or locales);
#   2. the package: `apt-get install ./DEB` in a chroot of the unpacked base, so the runtime
#      libraries are the ones the package's Depends names (dpkg-shlibdeps), plus any update
#      published since the base was made. apt's lists and downloaded packages stay in CACHE.
# Entrypoint /usr/bin/nodewarden, command `version`, user root (the agent's DaemonSet needs
# it; the webhook's Deployment runs the image as 65532).
#
# Before writing anything the script runs, in the chroot: `nodewarden version` (it must print
# TAG), `nodewarden check-policy /etc/nodewarden/policy.json`, and ldd (no library missing).
#
# Needs root (debootstrap, chroot, mounts in a private mount namespace) and the Debian
# packages debootstrap, umoci and jq. Environment: SOURCE_DATE_EPOCH (the image's creation
# time; default: the last commit's time).
set -Eeuo pipefail
export LC_ALL=C.UTF-8
trap 'echo "build-image.sh: line $LINENO: \"$BASH_COMMAND\" failed" >&2' ERR

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SRC=$(cd "$SCRIPT_DIR/.." && pwd -P)

out=. cache=${XDG_CACHE_HOME:-$HOME/.cache}/nodewarden/image name=nodewarden tag=
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build-image.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: packaging/build-image.sh [--out DIR] [--cache DIR] [--name NAME] [--tag TAG] DEB" >&2; exit 2; }
deb=$(realpath "$1")
[ -f "$deb" ] || { echo "build-image.sh: $1 is not a file" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "build-image.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }
for tool in debootstrap umoci jq dpkg-deb apt-get apt-config chroot unshare mount tar flock; do
  command -v "$tool" >/dev/null ||
    { echo "build-image.sh: $tool not found (apt-get install debootstrap umoci jq)" >&2; exit 1; }
done

[ "$(dpkg-deb -f "$deb" Package)" = nodewarden ] || { echo "build-image.sh: $deb is not nodewarden's package" >&2; exit 1; }
version=$(dpkg-deb -f "$deb" Version)
arch=$(dpkg-deb -f "$deb" Architecture)
[ -n "$tag" ] || tag=${version%-*}
# The release the package was built on: its Depends name that release's library versions.
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || { echo "build-image.sh: /etc/os-release has no VERSION_CODENAME" >&2; exit 1; }
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$SRC" log -1 --format=%ct 2>/dev/null || date +%s)
fi
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

mkdir -p "$out" "$cache"
out=$(cd "$out" && pwd -P)
cache=$(cd "$cache" && pwd -P)
base=$cache/base-$codename-$arch
aptcache=$cache/apt-$codename-$arch
# One build at a time per cache: the base is made once, and apt's lists and archives are
# shared by every build (two apt-get runs on them at once would fail on apt's own locks).
exec 9>"$cache/lock"
flock -w 1200 9 || { echo "build-image.sh: $cache/lock held by another build for 20 minutes" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/var/tmp}/nodewarden-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
log() { echo "build-image.sh: $*" >&2; }

# apt's settings on this host that the chroot's apt needs too (a proxy, a mirror snapshot
# whose Release is past its Valid-Until).
apt_opts=()
for key in Acquire::http::Proxy Acquire::https::Proxy Acquire::Check-Valid-Until Acquire::Check-Date; do
  value=$(apt-config dump "$key" | sed -n "s/^$key \"\(.*\)\";\$/\1/p" | head -n 1)
  [ -z "$value" ] || apt_opts+=(-o "$key=$value")
done

# in_root ROOT COMMAND…: COMMAND in a chroot of ROOT, in a private mount namespace holding
# /proc, /dev and apt's cache (lists and archives) bind-mounted from CACHE; everything
# mounted goes away with the namespace, whatever happens.
in_root() {
  local root=$1; shift
  mkdir -p "$aptcache/lists/partial" "$aptcache/archives/partial"
  unshare --mount --propagation private -- /bin/sh -euc '
    root=$1 cache=$2; shift 2
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --bind "$cache/lists" "$root/var/lib/apt/lists"
    mount --bind "$cache/archives" "$root/var/cache/apt/archives"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive "$@"' sh "$root" "$aptcache" "$@"
}

# dpkg's exclusions of Debian's -slim images: docs (copyright kept), man pages, info, locales.
slim_dpkg_cfg='path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*'

# ---- the base (cached) ---------------------------------------------------------------------
if [ ! -f "$base/index.json" ] || ! umoci stat --image "$base:base" >/dev/null 2>&1; then
  t0=$SECONDS
  # The mirror apt uses here for this release (deb822 or one-line sources alike), and the
  # suites of it this host follows (updates, security).
  targets=$(apt-get indextargets --format '$(ORIGIN) $(CODENAME) $(REPO_URI) $(RELEASE)' 'Identifier: Packages' |
    awk -v c="$codename" '$1 == "Debian" && ($2 == c || index($2, c "-") == 1) { print $3, $4 }' | sort -u)
  mirror=$(awk -v c="$codename" '$2 == c { print $1; exit }' <<<"$targets")
  [ -n "$mirror" ] || { log "apt has no Debian $codename mirror here (apt-get indextargets; run apt-get update)"; exit 1; }
  log "making the base: debootstrap --variant=minbase $codename from $mirror (once per machine; cached in $base)"
  rm -rf "$base.new"
  umoci init --layout "$base.new"
  umoci new --image "$base.new:base"
  umoci unpack --image "$base.new:base" "$work/base" >/dev/null
  rootfs=$work/base/rootfs
  if ! unshare --mount --propagation private -- \
      debootstrap --variant=minbase --arch="$arch" "$codename" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -n 20 "$work/debootstrap.log" >&2
    [ ! -f "$rootfs/debootstrap/debootstrap.log" ] || tail -n 20 "$rootfs/debootstrap/debootstrap.log" >&2
    log "debootstrap failed (log above)"
    exit 1
  fi
  # debootstrap's own downloads: apt's lists and archives live in CACHE from here on.
  rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/archives/"*.deb
  # Sources: every suite of this release the host follows from Debian, main only.
  {
    while read -r uri suite; do
      printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n' \
        "$uri" "$suite"
    done <<<"$targets"
  } >"$rootfs/etc/apt/sources.list.d/debian.sources"
  rm -f "$rootfs/etc/apt/sources.list"
  printf '%s\n' "$slim_dpkg_cfg" >"$rootfs/etc/dpkg/dpkg.cfg.d/slim"
  # Images are built, not administered: no recommends, no apt caches kept in a layer.
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$rootfs/etc/apt/apt.conf.d/90image"
  in_root "$rootfs" apt-get "${apt_opts[@]}" -q update >"$work/apt.log" 2>&1 ||
    { cat "$work/apt.log" >&2; log "apt-get update in the base failed"; exit 1; }
  in_root "$rootfs" apt-get "${apt_opts[@]}" -q -y upgrade >>"$work/apt.log" 2>&1 ||
    { cat "$work/apt.log" >&2; log "apt-get upgrade in the base failed"; exit 1; }
  # What dpkg installed before the exclusions existed, slimmed as they would have.
  (cd "$rootfs/usr/share" && find doc -mindepth 1 ! -type d ! -path 'doc/*/copyright' -delete &&
    find doc -mindepth 1 -type d -empty -delete &&
    rm -rf man/* groff/* info/* lintian/* linda/* locale/*)
  rm -rf "$rootfs/var/cache/apt/"*.bin "$rootfs/var/log/"*.log "$rootfs/var/log/apt/"* \
    "$rootfs/debootstrap" "$rootfs/var/cache/debconf/"*-old "$rootfs/var/lib/dpkg/"*-old
  umoci repack --image "$base.new:base" \
    --history.created_by "debootstrap --variant=minbase $codename $mirror; apt-get upgrade; slimmed" \
    "$work/base" >/dev/null
  umoci gc --layout "$base.new"
  rm -rf "$base" "$work/base"
  mv "$base.new" "$base"
  log "base made in $((SECONDS - t0)) s ($(du -sh "$base" | cut -f1) compressed)"
else
  log "base: $base (cached)"
fi

# ---- the package's layer -------------------------------------------------------------------
t0=$SECONDS
layout=$work/layout
cp -a "$base" "$layout"
umoci unpack --keep-dirlinks --image "$layout:base" "$work/bundle" >/dev/null
rootfs=$work/bundle/rootfs
cp "$deb" "$rootfs/tmp/nodewarden.deb"
# A mirror out of reach is no failure while the cached lists and packages have what the
# package needs (apt then says what it cannot find).
if ! in_root "$rootfs" apt-get "${apt_opts[@]}" -q update >"$work/update.log" 2>&1; then
  log "apt-get update failed (the cached lists are used): $(grep -m 1 '^[EW]:' "$work/update.log")"
fi
{
  in_root "$rootfs" apt-get "${apt_opts[@]}" -q -y install /tmp/nodewarden.deb &&
  in_root "$rootfs" apt-get "${apt_opts[@]}" -q -y upgrade
} >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; log "installing $(basename "$deb") failed"; exit 1; }
rm -f "$rootfs/tmp/nodewarden.deb"
rm -rf "$rootfs/var/cache/apt/"*.bin "$rootfs/var/log/"*.log "$rootfs/var/log/apt/"* \
  "$rootfs/var/cache/debconf/"*-old "$rootfs/var/lib/dpkg/"*-old

# The checks the Containerfile's runtime stage makes, in the image's own root.
got=$(in_root "$rootfs" /usr/bin/nodewarden version) || { log "nodewarden version fails in the image"; exit 1; }
[ "$(awk 'NR == 1 { print $2 }' <<<"$got")" = "$tag" ] ||
  { log "the image's nodewarden prints '$got', not version $tag (the tag)"; exit 1; }
in_root "$rootfs" /usr/bin/nodewarden check-policy /etc/nodewarden/policy.json >/dev/null ||
  { log "the image's /etc/nodewarden/policy.json does not validate"; exit 1; }
missing=$(in_root "$rootfs" ldd /usr/bin/nodewarden | grep 'not found' || true)
[ -z "$missing" ] || { log "libraries missing in the image: $missing"; exit 1; }

umoci repack --image "$layout:base" --history.created_by "apt-get install ./$(basename "$deb")" \
  "$work/bundle" >/dev/null
umoci config --image "$layout:base" --tag "$tag" --created "$created" \
  --author "nodewarden (packaging/build-image.sh)" \
  --config.entrypoint /usr/bin/nodewarden --config.cmd version --config.user 0:0 \
  --config.workingdir / --clear=config.env \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.label "org.opencontainers.image.title=$name" \
  --config.label "org.opencontainers.image.version=$tag" \
  --config.label "org.opencontainers.image.description=nodewarden: the node agent (DaemonSet) and the binding admission webhook (Deployment)" \
  --config.label "org.opencontainers.image.base.name=debian:$codename (debootstrap --variant=minbase)" \
  --history.created_by "umoci config: entrypoint /usr/bin/nodewarden, cmd version"
umoci rm --image "$layout:base"
umoci gc --layout "$layout"

final=$out/$name-image
archive=$out/${name}_${tag}_${arch}.oci.tar
rm -rf "$final.new"
mv "$layout" "$final.new"
rm -rf "$final"
mv "$final.new" "$final"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
  -C "$final" -cf "$archive.new" oci-layout index.json blobs
mv "$archive.new" "$archive"
log "image $name:$tag made in $((SECONDS - t0)) s: $final (OCI layout), $archive ($(du -k "$archive" | cut -f1) KiB)"
echo "$archive"
