#!/usr/bin/env bash
# from-help.sh — the man page and the bash completion of nodewarden, both generated from the
# binary's own --help output, so that neither can drift from the options the binary takes.
#
#   packaging/from-help.sh man BINARY VERSION DATE   > nodewarden.1
#   packaging/from-help.sh completion BINARY         > nodewarden (bash completion)
#
# The commands are the entries of `nodewarden --help`'s "Commands:" list ("explain eviction"
# and the other explain subcommands each count as one); each command's page section and
# options come from `nodewarden COMMAND --help`. An option line there is two spaces, the
# option and its value names, two or more spaces, its description; deeper-indented lines
# continue the description.
set -euo pipefail
export LC_ALL=C.UTF-8
# Every awk below reads its input to the end: one that exits early would leave the binary
# writing into a closed pipe (SIGPIPE, exit 141 under pipefail) whenever it writes late — as
# the slower sanitizer build does.

mode=${1:-}
bin=${2:-}
if [ -z "$mode" ] || [ ! -x "$bin" ]; then
  echo "usage: $0 man BINARY VERSION DATE | completion BINARY" >&2
  exit 2
fi

# The commands, one a line: "agent", "explain eviction", ...
commands() {
  "$bin" --help | awk '
    /^Commands:/ { on = 1; next }
    on && /^$/ { on = 0 }
    on && /^  [a-z]/ {
      if ($1 == "explain") print $1 " " $2; else print $1
    }'
}

# A command's option lines: "OPTION<TAB>VALUE" (VALUE empty for a flag), one per option
# spelling ("-o, --output FORMAT" gives both -o and --output).
options_of() {  # $1 = command (words)
  # shellcheck disable=SC2086  # the command's words
  "$bin" $1 --help | awk '
    { text = text " " $0 }
    # The usage block: "[--opt VALUE]", "[-o table|json]", "SOURCE: --snapshot FILE | ...".
    NR == 1 { usage = 1 }
    usage && /^$/ { usage = 0 }
    usage {
      line = $0; gsub(/[][]/, " ", line)
      w = split(line, words, / +/)
      for (i = 1; i <= w; i++) {
        if (words[i] !~ /^--?[a-z]/ || words[i] ~ /^-h$/) continue
        val = ""
        if (i < w && (words[i + 1] ~ /^[A-Z][A-Z.:]*$/ || words[i + 1] ~ /^[a-z]+[|][a-z|]+$/)) val = words[i + 1]
        opts[++count] = words[i]; vals[count] = val; group[count] = count
      }
      next
    }
    /^  -/ {
      term = $0; sub(/^ +/, "", term); sub(/  +.*$/, "", term)
      # "-o, --output FORMAT": every spelling takes the value named last.
      n = split(term, parts, /, /)
      val = parts[n]
      if (index(val, " ") > 0) { sub(/^[^ ]+ /, "", val); sub(/ .*$/, "", val) } else val = ""
      first = count + 1
      for (i = 1; i <= n; i++) {
        opt = parts[i]; sub(/ .*$/, "", opt)
        if (opt !~ /^-/) continue
        opts[++count] = opt; vals[count] = val; group[count] = first
      }
    }
    END {
      # A value named in words ("-o, --output FORMAT") may be spelled out in the usage
      # ("[-o table|json]"): then every spelling of that option takes those choices.
      for (i = 1; i <= count; i++) {
        if (vals[i] !~ /[|]/ && match(text, "[ []" opts[i] " [a-z]+[|][a-z|]+")) {
          val = substr(text, RSTART, RLENGTH); sub(/^.* /, "", val)
          for (j = 1; j <= count; j++) if (group[j] == group[i]) vals[j] = val
        }
      }
      for (i = 1; i <= count; i++) print opts[i] "\t" vals[i]
    }' | awk -F'\t' '
      !($1 in val) { order[++n] = $1; val[$1] = $2; next }
      val[$1] == "" || ($2 ~ /[|]/ && val[$1] !~ /[|]/) { val[$1] = $2 }
      END { for (i = 1; i <= n; i++) print order[i] "\t" val[order[i]] }'
}

roff_escape() {  # stdin -> stdout: backslashes, minus signs, quotes, dots, UTF-8 dashes
  # Apostrophes become \(aq and a word's leading dot gets \&, so that no line, however the
  # paragraphs are filled later, starts as a roff request; — and § become roff's glyphs.
  sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/'/\\\\(aq/g" -e 's/\(^\| \)\./\1\\\&./g' \
    -e 's/—/\\(em/g' -e 's/§/\\(sc/g'
}

# One command's --help as roff: the usage block verbatim, paragraphs filled, option lines as
# tagged paragraphs, other indented blocks verbatim.
help_to_roff() {
  roff_escape | awk '
    function close_nf() { if (nf) { print ".fi"; nf = 0 } }
    BEGIN { state = "usage" }
    state == "usage" {
      if ($0 == "") { close_nf(); print ".PP"; state = "text"; next }
      if (!nf) { print ".nf"; nf = 1 }
      print; next
    }
    /^$/ { close_nf(); opt = 0; print ".PP"; next }
    /^  \\-/ {
      close_nf()
      # The term: option spellings ("\-o," "\-\-output") and value names (FILE, text|json);
      # the description is the rest, after one space or more.
      w = split($0, words, / +/); term = ""; desc = ""; i = 2
      while (i <= w && words[i] ~ /^\\-/) {
        term = term (term == "" ? "" : " ") words[i]
        more = words[i] ~ /,$/; i++
        if (!more && i <= w && (words[i] ~ /^[A-Z][A-Z.:_]*,?$/ || words[i] ~ /^[a-z]+[|][a-z|]+,?$/ || words[i] ~ /^FILE[.][a-z]+$/)) {
          term = term " " words[i]; more = words[i] ~ /,$/; i++
        }
        if (!more) break
      }
      for (; i <= w; i++) desc = desc (desc == "" ? "" : " ") words[i]
      print ".TP"; print "\\fB" term "\\fR"
      if (desc != "") print desc
      opt = 1; next
    }
    opt && /^      +/ { line = $0; sub(/^ +/, "", line); print line; next }
    /^ / { opt = 0; if (!nf) { print ".nf"; nf = 1 } print; next }
    { opt = 0; close_nf(); print }
    END { close_nf() }'
}

man_page() {
  local version=$1 date=$2 cmd top
  top=$("$bin" --help)
  cat <<EOF
.\\" nodewarden(1), generated by packaging/from-help.sh from the output of
.\\" 'nodewarden --help' and 'nodewarden COMMAND --help' (nodewarden $version).
.TH NODEWARDEN 1 "$date" "nodewarden $version" "User Commands"
.SH NAME
nodewarden \\- keep a Kubernetes node out of the kernel OOM killer's hands
.SH SYNOPSIS
EOF
  while IFS= read -r cmd; do
    # shellcheck disable=SC2086
    "$bin" $cmd --help | awk '/^usage: / && !done { on = 1 } on && /^$/ { on = 0; done = 1 } on' | sed 's/^usage: //' |
      roff_escape | sed '1s/^/.nf\n/; $s/$/\n.fi\n.br/'
  done < <(commands)
  echo ".SH DESCRIPTION"
  # The paragraph after the usage line, up to the command list.
  printf '%s\n' "$top" | awk 'NR > 1 && /^Commands:/ { done = 1 } NR > 2 && !done' | sed '/^$/d' | roff_escape
  cat <<'EOF'
.PP
Each command is described below with its own options, as printed by
\fBnodewarden\fR \fICOMMAND\fR \fB\-\-help\fR.
As a kubectl plugin (\fBkubectl\-nodewarden\fR, a link to this binary), every command
runs as \fBkubectl nodewarden\fR \fICOMMAND\fR.
.SH COMMANDS
EOF
  while IFS= read -r cmd; do
    [ "$cmd" = version ] && { printf '.SS "nodewarden version"\nPrints the version.\n'; continue; }
    printf '.SS "nodewarden %s"\n' "$cmd"
    # shellcheck disable=SC2086
    "$bin" $cmd --help | help_to_roff
  done < <(commands)
  echo ".SH EXIT STATUS"
  printf '%s\n' "$top" | sed -n 's/^Exit status: //p' | roff_escape
  cat <<'EOF'
.SH FILES
.TP
.I /etc/nodewarden/policy.json
The agent's eviction policy under systemd (see \fBnodewarden check\-policy\fR);
\fBsystemctl reload nodewarden\fR re-reads it.
.TP
.I /etc/default/nodewarden
The unit's settings: \fBNODEWARDEN_ARGS\fR (options of \fBnodewarden agent\fR) and
\fBNODE_NAME\fR.
.TP
.I /etc/nodewarden/pods.d/
The default pod source of the unit (\fB\-\-source static\fR): one Pod object per *.json file.
.SH SIGNALS
The agent drains and exits 0 on SIGTERM or SIGINT, and re-reads its policy on SIGHUP.
Under systemd (Type=notify) it reports READY=1 after the first full scan and pings the
watchdog every housekeeping cycle.
.SH SEE ALSO
.BR systemctl (1),
.BR journalctl (1),
.BR kubectl (1);
/usr/share/doc/nodewarden/README.md and docs/reference.md in the source.
EOF
}

completion() {
  local cmd opts values files dirs opt val cases=""
  local -a cmds=()
  mapfile -t cmds < <(commands)
  for cmd in "${cmds[@]}"; do
    opts="" values="" files="" dirs=""
    while IFS=$'\t' read -r opt val; do
      opts+=" $opt"
      case $val in
        FILE|FILE.svg|URL) [ "$val" = URL ] || files+="|$opt" ;;
        DIR|PATH) dirs+="|$opt" ;;
        *\|*) values+="      ${opt}) COMPREPLY=(\$(compgen -W '${val//|/ }' -- \"\$cur\")); return ;;"$'\n' ;;
      esac
    done < <(options_of "$cmd")
    opts+=" --help"
    cases+="    '$cmd')"$'\n'"      opts='${opts# }'"$'\n'
    cases+="      case \$prev in"$'\n'
    [ -z "$values" ] || cases+="${values//      /        }"
    [ -z "$files" ] || cases+="        ${files#|}) _filedir; return ;;"$'\n'
    [ -z "$dirs" ] || cases+="        ${dirs#|}) _filedir -d; return ;;"$'\n'
    cases+="      esac ;;"$'\n'
  done
  local top=() sub=()
  for cmd in "${cmds[@]}"; do
    case $cmd in
      "explain "*) sub+=("${cmd#explain }"); [[ " ${top[*]} " == *" explain "* ]] || top+=(explain) ;;
      *) top+=("$cmd") ;;
    esac
  done
  cat <<EOF
# bash completion for nodewarden and kubectl-nodewarden
# Generated by packaging/from-help.sh from 'nodewarden --help' and each command's --help.

_nodewarden() {
  local cur prev words cword
  _init_completion || return
  local i cmd=""
  for ((i = 1; i < cword; i++)); do
    case \${words[i]} in
      -*) ;;
      explain) cmd=explain ;;
      *) if [ "\$cmd" = explain ]; then cmd="explain \${words[i]}"; break
         elif [ -z "\$cmd" ]; then cmd=\${words[i]}; [ "\$cmd" = explain ] || break; fi ;;
    esac
  done
  if [ -z "\$cmd" ]; then
    COMPREPLY=(\$(compgen -W '${top[*]} --help' -- "\$cur"))
    return
  fi
  if [ "\$cmd" = explain ]; then
    COMPREPLY=(\$(compgen -W '${sub[*]}' -- "\$cur"))
    return
  fi
  local opts=""
  case \$cmd in
$cases  esac
  if [[ \$cur == -* ]]; then
    COMPREPLY=(\$(compgen -W "\$opts" -- "\$cur"))
  elif [ "\$cmd" = check-policy ]; then
    _filedir
  fi
}
complete -F _nodewarden nodewarden kubectl-nodewarden
EOF
}

case $mode in
  man)
    [ $# -eq 4 ] || { echo "usage: $0 man BINARY VERSION DATE" >&2; exit 2; }
    man_page "$3" "$4"
    ;;
  completion)
    completion
    ;;
  *)
    echo "usage: $0 man BINARY VERSION DATE | completion BINARY" >&2
    exit 2
    ;;
esac
