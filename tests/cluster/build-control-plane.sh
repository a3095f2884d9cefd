#!/usr/bin/env bash
# build-control-plane.sh GO MODULE_DIR OUTPUT
#
# Builds nw-control-plane (tests/upstream/cmd/nw-control-plane: Kubernetes' kube-apiserver,
# kube-scheduler, kube-controller-manager and etcd as one binary, plus the `up` launcher)
# with Go's own caches (GOCACHE, GOMODCACHE: only a machine's first build is slow). The
# release is the one go.mod requires; it is stamped into the binary as Kubernetes' own
# build stamps it (hack/lib/version.sh), so /version answers it.
#
# No Go, or a Go older than go.mod's `go` line: OUTPUT becomes a script that prints the
# reason and exits 77, so every lane test that starts a cluster is skipped saying why. A Go
# that is new enough but fails to build fails here, loudly.
set -euo pipefail
go=$1 module=$2 output=$(realpath -m "$3")

skip() {
  printf '#!/bin/sh\necho "%s" >&2\nexit 77\n' "$1" >"$output.tmp"
  chmod +x "$output.tmp"
  mv "$output.tmp" "$output"
  echo "build-control-plane: $1" >&2
  exit 0
}

[ -n "$go" ] && [ -x "$go" ] || skip "no Go toolchain (looked for go on the PATH and /usr/local/go/bin/go): the real-control-plane lane needs Go to build Kubernetes"
need=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$module/go.mod")
have=$("$go" env GOVERSION 2>/dev/null | sed 's/^go//') || have=
[ -n "$have" ] || skip "$go does not run (go env GOVERSION failed)"
# sort -V orders dotted versions; the older of the two first.
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
  skip "$go is go$have; $module/go.mod needs go $need or newer to build Kubernetes"
fi

kube=$(cd "$module" && GOTOOLCHAIN=local "$go" list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${kube#v}; major=${major%%.*}
minor=${kube#v*.}; minor=${minor%%.*}
x="-X k8s.io/component-base/version"
y="-X k8s.io/client-go/pkg/version"
ldflags="-s -w"
for pkg in "$x" "$y"; do
  ldflags+=" $pkg.gitVersion=$kube $pkg.gitMajor=$major $pkg.gitMinor=$minor $pkg.gitTreeState=clean"
done
# go build writes OUTPUT only when what it would link differs from what is there (a warm
# build is then a check of the cache), but refuses to overwrite a file that is not a
# program: the skip script of an earlier run without Go.
if [ -f "$output" ] && [ "$(head -c 2 "$output")" = '#!' ]; then rm -f "$output"; fi
cd "$module"
# GOTOOLCHAIN=local: never fetch another toolchain; -buildvcs=false: the stamp above is the
# version, not this checkout's commit (which would also relink on every commit).
GOTOOLCHAIN=local "$go" build -buildvcs=false -ldflags "$ldflags" -o "$output" ./cmd/nw-control-plane
