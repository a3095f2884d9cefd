#!/usr/bin/env bash
# Times the build of one pass of `./dev test` (or of `./dev run`) as CI meets it: a fresh
# clone of COMMIT at a new path, a fresh build directory, the same options and targets as
# ./dev, and a ccache that is empty (cold) or primed by the same build in another clone
# (warm). Prints one line: wall and CPU seconds (user + system), the load average before and
# after, and ccache's hits and misses.
#
#   .ci/measure-build.sh [--commit COMMIT] [--busy] host|sanitizer|run cold|warm
#
# --busy keeps one core busy beside the build (`nice -n 5 sh -c 'while :; do :; done'`, the
# build runs under nice 5 too). A cold run keeps its cache in /tmp/nodewarden-ccache-COMMIT-PASS
# as the primed cache of the warm run that follows (`run` warm uses the host pass's). The
# clones go to /tmp and are removed afterwards. Needs what ./dev installs (ccache included).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=HEAD busy=0
while [ $# -gt 0 ]; do
  case $1 in
    --commit) commit=$2; shift 2 ;;
    --busy) busy=1; shift ;;
    *) break ;;
  esac
done
[ $# -eq 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
pass=$1 cache=$2
commit=$(git -C "$repo" rev-parse --short "$commit")

# What ./dev passes (keep in step with ./dev).
host_options=(-Dwerror=true -Dbench=false -Dcpp_args=-g1)
sanitizer_options=(-Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false
                   --buildtype=debug -Dcpp_args=-g1)

# The files of every target that the selected tests depend on, as `meson test` builds them.
targets_of_tests() {  # BUILD_DIR SKIP_SUITE SKIP_TEST
  python3 - "$@" <<'EOF'
import json, os, sys
build, skip_suite, skip_test = sys.argv[1:4]
info = os.path.join(build, 'meson-info')
targets = {t['id']: t['filename'] for t in json.load(open(os.path.join(info, 'intro-targets.json')))}
out = set()
for t in json.load(open(os.path.join(info, 'intro-tests.json'))):
    if skip_suite in [s.split(':')[-1] for s in t['suite']] or t['name'] == skip_test:
        continue
    for d in t['depends']:
        out.update(os.path.relpath(f, os.path.abspath(build)) for f in targets[d])
print('\n'.join(sorted(out)))
EOF
}

build_in() {  # CLONE_DIR
  local dir=$1
  rm -rf "$dir"
  git clone -q "$repo" "$dir"
  git -C "$dir" checkout -q "$commit"
  cd "$dir"
  export CCACHE_BASEDIR=$dir CCACHE_NOHASHDIR=1
  case $pass in
    host)
      meson setup build "${host_options[@]}" >/dev/null
      nice -n 5 ninja -C build nodewarden $(targets_of_tests build fuzz -) ;;
    sanitizer)
      meson setup build-sanitize "${sanitizer_options[@]}" >/dev/null
      nice -n 5 ninja -C build-sanitize $(targets_of_tests build-sanitize - systemd/package) ;;
    run)
      meson setup build "${host_options[@]}" >/dev/null
      nice -n 5 ninja -C build nodewarden ;;
    *) echo "measure-build: unknown pass $pass (host, sanitizer or run)" >&2; return 2 ;;
  esac
}

cache_pass=$pass
[ "$pass" = run ] && [ "$cache" = warm ] && cache_pass=host  # ./dev run after a host pass
export CCACHE_DIR=/tmp/nodewarden-ccache-$commit-$cache_pass
case $cache in
  cold) rm -rf "$CCACHE_DIR" ;;
  warm) [ -d "$CCACHE_DIR" ] || { echo "measure-build: run '$cache_pass cold' first" >&2; exit 2; } ;;
  *) echo "measure-build: cold or warm, not $cache" >&2; exit 2 ;;
esac
ccache -z >/dev/null

clone=/tmp/nodewarden-measure-$pass-$cache-$$
log=/tmp/nodewarden-measure-$pass-$cache-$$.log
spinner=
if [ "$busy" = 1 ]; then
  nice -n 5 sh -c 'while :; do :; done' &
  spinner=$!
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s.%N)
status=0
/usr/bin/time -f '%U %S' -o "$log.cpu" \
  bash -c "$(declare -f build_in targets_of_tests); $(declare -p repo commit pass host_options sanitizer_options); build_in $clone" \
  >"$log" 2>&1 || status=$?
end=$(date +%s.%N)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
[ -n "$spinner" ] && kill "$spinner"
rm -rf "$clone"
stats=$(ccache --print-stats | awk -F'\t' '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" || $1 == "cache_miss" { printf " %s=%s", $1, $2 }')
printf '%s %s %s%s: exit %d, wall %.0f s, cpu %.0f s, %s build steps, load %s -> %s,%s\n' \
  "$commit" "$pass" "$cache" "$([ "$busy" = 1 ] && echo ' busy')" "$status" \
  "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$(awk '{ print $1 + $2 }' "$log.cpu")" \
  "$(grep -c '^\[' "$log" || true)" "$load_before" "$load_after" "$stats"
[ "$status" = 0 ] && rm -f "$log" "$log.cpu"
exit "$status"
