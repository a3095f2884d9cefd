#!/bin/sh
# run-judge.sh JUDGE MODULE_DIR BUILD_DIR ARGS...
# Builds the judge cmd/JUDGE of the Go module MODULE_DIR into BUILD_DIR with the Go toolchain
# of this machine, then runs it with ARGS. Exits 77 (meson's skip) with the reason when Go is
# absent or older than the module's `go` line; never downloads a toolchain (GOTOOLCHAIN=local).
set -eu
judge=$1 module=$2 out=$3
shift 3

# $GO names the go command to use; else go on PATH, else the official tarball's place.
go=${GO:-$(command -v go 2>/dev/null || true)}
[ -n "$go" ] || [ ! -x /usr/local/go/bin/go ] || go=/usr/local/go/bin/go
if [ -z "$go" ] || ! [ -x "$(command -v "$go" 2>/dev/null || echo "$go")" ]; then
  echo "$judge: skipped: Go is not installed (the judge is built from $module with Go)"
  exit 77
fi
export GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false"
need=$(sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' "$module/go.mod")
have=$("$go" env GOVERSION 2>/dev/null | sed 's/^go//')
older() { # older A B: version A < version B
  [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -t. -k1,1n -k2,2n -k3,3n | head -n1)" = "$1" ]
}
if [ -z "$have" ] || older "$have" "$need"; then
  echo "$judge: skipped: $go is Go ${have:-of unknown version}; $module/go.mod needs Go $need or newer"
  exit 77
fi
mkdir -p "$out"
echo "$judge: building with $go (Go $have) in $module"
(cd "$module" && "$go" build -o "$out/$judge" "./cmd/$judge")
echo "$judge: $out/$judge $*"
exec "$out/$judge" "$@"
