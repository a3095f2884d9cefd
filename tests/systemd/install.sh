#!/bin/sh
# `meson install --destdir` of the build tree puts the binary, the unit, the policy and the
# unit's documentation where expected, and the unit's paths point at what was installed.
# Usage: install.sh MESON MESON_VERSION BUILDDIR BINARY UNIT POLICY MANIFESTS_DIR ENV_EXAMPLE README
# (absolute install paths, as meson computed them). Exit 0 pass, 1 fail, 77 skip.
set -u
meson=$1 meson_version=$2 builddir=$3
shift 3
bin=$1 unit=$2 policy=$3 manifests=$4 env_example=$5 readme=$6
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

found_version=$("$meson" --version 2>/dev/null) || found_version=none
if [ "$found_version" != "$meson_version" ]; then
  echo "SKIP: $meson is version $found_version, but meson $meson_version configured $builddir" >&2
  exit 77
fi

dest=$(mktemp -d "${TMPDIR:-/tmp}/nodewarden-install.XXXXXX") || exit 1
trap 'rm -rf "$dest"' EXIT
trap 'exit 1' HUP INT TERM

if ! "$meson" install -C "$builddir" --no-rebuild --destdir "$dest" > "$dest.log" 2>&1; then
  cat "$dest.log" >&2
  rm -f "$dest.log"
  echo "FAIL: meson install failed (log above)" >&2
  exit 1
fi
rm -f "$dest.log"
echo "installed under DESTDIR:"
(cd "$dest" && find . \( -type f -o -type d -empty \) | sed 's|^\.||' | sort)

[ -f "$dest$bin" ] && [ -x "$dest$bin" ] || fail "no executable $bin"
[ -f "$dest$unit" ] || fail "no unit $unit"
[ -f "$dest$policy" ] || fail "no policy $policy"
[ -d "$dest$manifests" ] || fail "no manifests directory $manifests"
[ -f "$dest$env_example" ] || fail "no EnvironmentFile example $env_example"
[ -f "$dest$readme" ] || fail "no README $readme"
"$dest$bin" version || fail "the installed binary does not run"
# kubectl's plugin discovery: kubectl-nodewarden beside the binary, pointing at it.
plugin="$(dirname "$dest$bin")/kubectl-nodewarden"
[ -L "$plugin" ] || fail "no kubectl-nodewarden symlink beside $bin"
[ "$(readlink "$plugin")" = "nodewarden" ] || fail "kubectl-nodewarden points at $(readlink "$plugin")"
"$plugin" version >/dev/null || fail "kubectl-nodewarden does not run"

# The installed unit names the installed files.
if [ -f "$dest$unit" ]; then
  exec_start=$(sed -n 's/^ExecStart=//p' "$dest$unit")
  set -f; set -- $exec_start; set +f
  [ "$1" = "$bin" ] || fail "ExecStart runs $1, installed binary is $bin"
  case " $exec_start " in
    *" --policy $policy "*) ;;
    *) fail "ExecStart does not pass --policy $policy: $exec_start" ;;
  esac
  grep -qxF "Documentation=file:$readme" "$dest$unit" || fail "Documentation= is not file:$readme"
  grep -qF -- "--manifests $manifests\"" "$dest$unit" || fail "the default NODEWARDEN_ARGS do not read $manifests"
fi

[ "$status" -eq 0 ] && echo "PASS: meson install --destdir"
exit "$status"
