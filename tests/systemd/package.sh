#!/bin/sh
# The Debian package (packaging/build-deb.sh) built from the built binary into a temporary
# directory: its control data (Depends, conffiles, maintainer scripts), its files, the man page
# (rendered by groff, and by man where installed), the bash completion (sourced by bash, and
# completing a command's options), the kubectl plugin link, and the unit with Debian's paths.
# Usage: package.sh SOURCE_ROOT BINARY. Exit 0 pass, 1 fail, 77 skip (no dpkg-deb).
# shellcheck disable=SC2015,SC2016  # "check && ... || fail"; literal $ in expected text
set -u
src=$1 bin=$2
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

for tool in dpkg-deb dpkg; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not found (not a Debian host)" >&2; exit 77; }
done

dest=$(mktemp -d "${TMPDIR:-/tmp}/nodewarden-package.XXXXXX") || exit 1
trap 'rm -rf "$dest"' EXIT
trap 'exit 1' HUP INT TERM

if ! deb=$("$src/packaging/build-deb.sh" --out "$dest" "$bin" 2>"$dest/build.log"); then
  cat "$dest/build.log" >&2
  echo "FAIL: packaging/build-deb.sh failed (log above)" >&2
  exit 1
fi
cat "$dest/build.log" >&2
version=$("$bin" version | awk '{ print $2 }')
arch=$(dpkg --print-architecture)
[ "$(basename "$deb")" = "nodewarden_${version}-1_${arch}.deb" ] || fail "package file name $(basename "$deb")"
echo "built $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB"

# ---- control data ----
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = nodewarden ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version-1" ] || fail "Version: $(field Version)"
depends=$(field Depends)
echo "Depends: $depends"
for lib in libc6 libstdc++6 libssl3; do
  case ", $depends" in *", $lib"*) ;; *) fail "Depends lacks $lib: $depends" ;; esac
done
dpkg-deb -e "$deb" "$dest/DEBIAN"
printf '/etc/default/nodewarden\n/etc/nodewarden/policy.json\n' | cmp -s - "$dest/DEBIAN/conffiles" ||
  fail "conffiles: $(tr '\n' ' ' <"$dest/DEBIAN/conffiles")"
for script in postinst prerm postrm; do
  [ -x "$dest/DEBIAN/$script" ] || { fail "no executable $script"; continue; }
  sh -n "$dest/DEBIAN/$script" || fail "$script: shell syntax"
done
grep -q 'deb-systemd-helper enable nodewarden.service' "$dest/DEBIAN/postinst" || fail "postinst does not enable the unit"
grep -q 'deb-systemd-invoke "$action" nodewarden.service' "$dest/DEBIAN/postinst" || fail "postinst does not start the unit"
grep -q 'deb-systemd-invoke stop nodewarden.service' "$dest/DEBIAN/prerm" || fail "prerm does not stop the unit"
grep -q 'deb-systemd-helper purge nodewarden.service' "$dest/DEBIAN/postrm" || fail "postrm does not purge the unit's state"
(cd "$dest" && dpkg-deb -x "$deb" root) || fail "dpkg-deb -x"
(cd "$dest/root" && md5sum --quiet -c "$dest/DEBIAN/md5sums") || fail "md5sums do not match the files"

# ---- files ----
r=$dest/root
unit=
for d in lib/systemd/system usr/lib/systemd/system; do
  if [ -f "$r/$d/nodewarden.service" ]; then unit=$d/nodewarden.service; break; fi
done
for f in usr/bin/nodewarden etc/nodewarden/policy.json etc/default/nodewarden "$unit" \
         usr/share/man/man1/nodewarden.1.gz usr/share/bash-completion/completions/nodewarden \
         usr/share/doc/nodewarden/copyright usr/share/doc/nodewarden/changelog.Debian.gz \
         usr/share/doc/nodewarden/README.md usr/share/doc/nodewarden/docs/reference.md; do
  [ -n "$f" ] && [ -f "$r/$f" ] || fail "no /$f in the package"
done
[ -d "$r/etc/nodewarden/pods.d" ] || fail "no /etc/nodewarden/pods.d"
[ "$(readlink "$r/usr/bin/kubectl-nodewarden")" = nodewarden ] || fail "/usr/bin/kubectl-nodewarden is not a link to nodewarden"
"$r/usr/bin/kubectl-nodewarden" version >/dev/null || fail "kubectl-nodewarden does not run"
"$r/usr/bin/nodewarden" check-policy "$r/etc/nodewarden/policy.json" >/dev/null || fail "the packaged policy does not validate"
if [ -n "$unit" ]; then
  grep -qx 'ExecStart=/usr/bin/nodewarden agent --policy /etc/nodewarden/policy.json --realtime 1 $NODEWARDEN_ARGS' "$r/$unit" ||
    fail "ExecStart: $(grep '^ExecStart=' "$r/$unit")"
  grep -qx 'EnvironmentFile=-/etc/default/nodewarden' "$r/$unit" || fail "EnvironmentFile is not /etc/default/nodewarden"
  grep -qx 'Documentation=file:/usr/share/doc/nodewarden/README.md' "$r/$unit" || fail "Documentation= is not the packaged README"
  ! grep -q '@[a-z]*@' "$r/$unit" || fail "unsubstituted @...@ in the unit"
fi
grep -q '^#NODEWARDEN_ARGS="--source kubernetes' "$r/etc/default/nodewarden" || fail "/etc/default/nodewarden lacks the kubernetes example"
! grep -q '@[a-z]*@' "$r/etc/default/nodewarden" || fail "unsubstituted @...@ in /etc/default/nodewarden"
# Everything in /etc/default/nodewarden is a comment or blank: the unit's defaults apply.
! grep -qv '^\(#.*\)\{0,1\}$' "$r/etc/default/nodewarden" || fail "/etc/default/nodewarden sets something"

# ---- the man page ----
man_page=$dest/nodewarden.1
gzip -dc "$r/usr/share/man/man1/nodewarden.1.gz" >"$man_page" || fail "the man page is not gzip"
[ "$(readlink "$r/usr/share/man/man1/kubectl-nodewarden.1.gz")" = nodewarden.1.gz ] || fail "no kubectl-nodewarden.1.gz link"
if command -v groff >/dev/null 2>&1; then
  warnings=$(groff -man -Tutf8 -ww -z "$man_page" 2>&1)
  [ -z "$warnings" ] || fail "groff warns about the man page: $warnings"
  text=$(groff -man -Tutf8 -P-c "$man_page" 2>/dev/null | sed 's/.\x08//g')
  for want in 'NAME' 'SYNOPSIS' 'nodewarden agent' '--policy FILE' '--dry-run' 'nodewarden explain eviction' \
              'EXIT STATUS' '/etc/default/nodewarden'; do
    printf '%s' "$text" | grep -qF -- "$want" || fail "the rendered man page lacks '$want'"
  done
  # Every option of `nodewarden agent --help` has its own entry.
  for opt in $("$bin" agent --help | sed -n 's/^  \(--[a-z-]*\).*/\1/p'); do
    printf '%s' "$text" | grep -qE -- "^ +$opt( |\$)" || fail "the man page has no entry for agent $opt"
  done
else
  echo "groff not installed: the man page is not rendered"
fi
if command -v man >/dev/null 2>&1; then
  MANWIDTH=80 man -l "$man_page" >/dev/null 2>"$dest/man.err" || fail "man -l: $(cat "$dest/man.err")"
fi

# ---- bash completion ----
completion=$r/usr/share/bash-completion/completions/nodewarden
if command -v bash >/dev/null 2>&1; then
  bash -n "$completion" || fail "the completion file is not valid bash"
  # Sourced without bash-completion's helpers: _init_completion and _filedir stubbed.
  out=$(bash -c '
    _init_completion() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
    _filedir() { COMPREPLY=(FILES); }
    . "$1" || exit 1
    complete -p nodewarden kubectl-nodewarden >/dev/null || exit 2
    try() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _nodewarden; echo "$*: ${COMPREPLY[*]}"; }
    try nodewarden ""
    try nodewarden agent --dry
    try nodewarden agent --log-format ""
    try nodewarden agent --policy ""
    try nodewarden explain ""
    try nodewarden explain eviction -o ""
    try kubectl-nodewarden status --w
  ' sh "$completion" 2>&1) || fail "sourcing the completion failed: $out"
  echo "$out"
  expect() { printf '%s\n' "$out" | grep -qxF -- "$1" || fail "completion: expected '$1'"; }
  expect "nodewarden : agent webhook demo explain check-policy status replay tune why version --help"
  expect "nodewarden agent --dry: --dry-run"
  expect "nodewarden agent --log-format : text json"
  expect "nodewarden agent --policy : FILES"
  expect "nodewarden explain : eviction admission preemption --batch"
  expect "nodewarden explain eviction -o : table json"
  expect "kubectl-nodewarden status --w: --watch"
fi

# ---- lintian, where installed (informational: its verdict depends on its version) ----
if command -v lintian >/dev/null 2>&1 && [ "${NODEWARDEN_LINTIAN:-0}" = 1 ]; then
  lintian --info "$deb" || true
fi

[ "$status" -eq 0 ] && echo "PASS: the Debian package"
exit "$status"
