#!/bin/bash
# systemd-unit.sh — the Debian package's unit under a real systemd (PID 1), run inside the VM
# by `tests/vm/run-in-vm.sh --systemd` (tests/vm/systemd-lane.sh does that).
#
#   tests/vm/systemd-unit.sh PACKAGE.deb
#
# 1. A pod: a best-effort pod's slice, as the kubelet's systemd cgroup driver makes it
#    (kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice), with a
#    sleeping process in it (systemd-run), and its Pod object in /etc/nodewarden/pods.d.
# 2. dpkg -i: the postinst enables the unit and starts it (deb-systemd-invoke).
# 3. A drop-in for the test: --dry-run, WatchdogSec=5s, TimeoutAbortSec=5s. `systemctl
#    restart` returns once the agent has sent READY=1 (Type=notify): active/running, with
#    its STATUS= text.
# 4. The policy is changed (memory.available hard threshold 64Gi, above the VM's memory) and
#    `systemctl reload` sends SIGHUP: the journal shows reload, policy-reloaded and the
#    decision, `evict-dry-run` for the pod, and /v1/state the new threshold. A second reload
#    with the file unchanged (so not the agent's own file watch) reloads it again.
# 5. Several cycles later the journal still has exactly one line for that decision.
# 6. SIGSTOP on the main process (a hung loop: no more WATCHDOG=1): systemd's watchdog kills
#    it and restarts the unit (NRestarts + 1, a new main PID, active again).
# 7. `systemctl stop`: the agent logs stopping (SIGTERM) and stopped, exits 0.
# 8. With NODEWARDEN_VM_PURGE=1: dpkg --purge removes the conffiles, the postrm forgets the unit.
# Prints PASS/FAIL lines and a timing per step; exit 0 if all passed, 1 otherwise, 77 if
# not running under systemd.
# shellcheck disable=SC2015,SC2317  # "check && pass || fail" on purpose; wait_for calls functions
set -u
deb=${1:?usage: systemd-unit.sh PACKAGE.deb}
status=0
T0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
pass() { echo "PASS [$(since "$T0") s]: $*"; }
fail() { echo "FAIL [$(since "$T0") s]: $*"; status=1; }
prop() { systemctl show -P "$1" nodewarden.service; }
# The agent's own lines (not systemd's about the unit).
agent_log() { journalctl -q _SYSTEMD_UNIT=nodewarden.service -o cat --no-pager; }
has_line() { agent_log | grep -q -- "$1"; }
wait_for() {  # SECONDS COMMAND...: poll every 0.5 s
  local deadline=$(($(date +%s) + $1))
  shift
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

if [ "$(cat /proc/1/comm 2>/dev/null)" != systemd ]; then
  echo "SKIP: PID 1 is not systemd (run this with tests/vm/run-in-vm.sh --systemd)"
  exit 77
fi
[ -f "$deb" ] || { echo "FAIL: no package $deb"; exit 1; }

# ---- 1. a pod -------------------------------------------------------------------------------
uid=5eed0000-0000-4000-8000-00000000a001
slice=kubepods-besteffort-pod${uid//-/_}.slice
if systemd-run --quiet --unit=nw-test-pod --slice="$slice" -p MemoryAccounting=yes sleep 3600; then
  pass "pod $uid: sleep in $(systemctl show -P ControlGroup nw-test-pod.service)"
else
  fail "systemd-run could not start the pod's process"
fi
mkdir -p /etc/nodewarden/pods.d
cat >/etc/nodewarden/pods.d/default_sleeper.json <<EOF
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "sleeper", "namespace": "default", "uid": "$uid"},
 "spec": {"containers": [{"name": "main", "resources": {}}], "priority": 0},
 "status": {"phase": "Running"}}
EOF

# ---- 2. dpkg -i -------------------------------------------------------------------------------
rm -f /var/lib/man-db/auto-update  # no man-db trigger: minutes under TCG, nothing to prove
t=$(date +%s.%N)
if dpkg -i "$deb" >/tmp/dpkg.log 2>&1; then
  pass "dpkg -i $(basename "$deb") in $(since "$t") s"
else
  cat /tmp/dpkg.log
  fail "dpkg -i failed"
fi
[ "$(systemctl is-enabled nodewarden.service 2>&1)" = enabled ] && pass "postinst enabled the unit" ||
  fail "the unit is $(systemctl is-enabled nodewarden.service 2>&1) after install, not enabled"
[ "$(prop ActiveState)" = active ] && pass "postinst started the unit (package defaults: $(prop StatusText))" ||
  fail "the unit is $(prop ActiveState)/$(prop SubState) after install"

# ---- 3. start reaches READY -------------------------------------------------------------------
mkdir -p /etc/systemd/system/nodewarden.service.d
cat >/etc/systemd/system/nodewarden.service.d/test.conf <<'EOF'
[Service]
Environment="NODEWARDEN_ARGS=--source static --manifests /etc/nodewarden/pods.d --dry-run"
WatchdogSec=5s
TimeoutAbortSec=5s
EOF
systemctl daemon-reload
t=$(date +%s.%N)
if systemctl restart nodewarden.service; then
  ready_s=$(since "$t")
  state="$(prop ActiveState)/$(prop SubState)"
  text=$(prop StatusText)
  if [ "$state" = active/running ] && [[ $text == watching* ]]; then
    pass "systemctl restart returned after READY=1 in $ready_s s: $state, status \"$text\""
  else
    fail "after systemctl restart: $state, status \"$text\""
  fi
else
  fail "systemctl restart nodewarden failed"
fi
log=$(agent_log)
line=$(printf '%s\n' "$log" | grep ' ready ' | tail -n 1)
[ -n "$line" ] && pass "journal: $line" || fail "no 'ready' line in the journal"

# ---- 4. reload re-reads the policy ------------------------------------------------------------
printf '%s\n' "$log" | grep -q 'evict-dry-run' && fail "a decision before the policy asked for one"
cat >/etc/nodewarden/policy.json.new <<'EOF'
{
  "evictionHard": { "memory.available": "64Gi" },
  "evictionMinimumReclaim": { "memory.available": "64Mi" },
  "evictionMaxPodGracePeriod": 30,
  "housekeepingInterval": "1s"
}
EOF
mv /etc/nodewarden/policy.json.new /etc/nodewarden/policy.json
pid_before=$(prop MainPID)
t=$(date +%s.%N)
systemctl reload nodewarden.service || fail "systemctl reload failed"
if wait_for 20 has_line ' policy-reloaded '; then
  log=$(agent_log)
  pass "journal: $(printf '%s\n' "$log" | grep -E ' (reload signal=SIGHUP|policy-reloaded)( |$)' | tr '\n' '|')"
else
  fail "no 'policy-reloaded' line after systemctl reload"
fi
[ "$(prop MainPID)" = "$pid_before" ] && pass "reload kept the process (PID $pid_before)" ||
  fail "reload replaced the process ($pid_before -> $(prop MainPID))"
if wait_for 20 has_line "evict-dry-run .*uid=$uid"; then
  pass "decision: $(agent_log | grep 'evict-dry-run' | head -n 1)"
else
  fail "no evict-dry-run decision for the pod after the reload"
fi
decided_at=$(date +%s)
state_json=$(nodewarden status -o json 2>&1)
if printf '%s' "$state_json" | grep -q 68719476736; then
  pass "/v1/state has the reloaded threshold (64Gi = 68719476736 bytes)"
else
  fail "/v1/state does not show the 64Gi threshold: $(printf '%s' "$state_json" | head -c 600)"
fi
# The agent also re-reads a policy file that changed, so the reload above may have come from
# either. With the file unchanged, only the SIGHUP can make it reload.
reloads=$(agent_log | grep -c ' policy-reloaded ')
hups=$(agent_log | grep -c ' reload signal=SIGHUP')
systemctl reload nodewarden.service || fail "systemctl reload failed"
reloaded_again() { [ "$(agent_log | grep -c ' policy-reloaded ')" -gt "$reloads" ] &&
                   [ "$(agent_log | grep -c ' reload signal=SIGHUP')" -gt "$hups" ]; }
if wait_for 20 reloaded_again; then
  pass "systemctl reload with the file unchanged: SIGHUP, policy-reloaded ($((reloads + 1)) reloads in all)"
else
  fail "systemctl reload with the file unchanged did not reload the policy"
fi

# ---- 5. one line per decision -----------------------------------------------------------------
# At least six more cycles (1 s each), all under the same pressure.
while [ $(($(date +%s) - decided_at)) -lt 7 ]; do sleep 0.5; done
log=$(agent_log)
lines=$(printf '%s\n' "$log" | grep -c 'evict-dry-run .*uid='"$uid")
cycles=$(printf '%s\n' "$log" | grep -c .)
if [ "$lines" = 1 ]; then
  pass "one journal line for the decision after $(($(date +%s) - decided_at)) s more of cycles ($cycles agent lines in all)"
else
  fail "$lines journal lines for one decision"
fi
# Each journal entry is one whole event: no entry is a stray fragment of another.
bad=$(printf '%s\n' "$log" | grep -cvE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[^ ]+ (debug|info|warn|error) [a-z0-9-]+( |$)')
[ "$bad" = 0 ] && pass "every agent journal entry is one event line" ||
  fail "$bad journal entries are not event lines: $(printf '%s\n' "$log" | grep -vE '^[0-9]{4}-' | head -n 3)"

# ---- 6. the watchdog restarts a hung loop -------------------------------------------------------
restarts=$(prop NRestarts)
pid=$(prop MainPID)
t=$(date +%s.%N)
kill -STOP "$pid"
restarted() { [ "$(prop NRestarts)" -gt "$restarts" ] && [ "$(prop ActiveState)" = active ] &&
              [ "$(prop SubState)" = running ] && [ "$(prop MainPID)" != "$pid" ]; }
if wait_for 40 restarted; then
  pass "watchdog: PID $pid stopped, restarted as PID $(prop MainPID) after $(since "$t") s (NRestarts $restarts -> $(prop NRestarts))"
else
  fail "no watchdog restart within 40 s: $(prop ActiveState)/$(prop SubState), NRestarts $(prop NRestarts), PID $(prop MainPID)"
fi
line=$(journalctl -q -u nodewarden.service -o cat --no-pager | grep 'Watchdog timeout' | tail -n 1)
[ -n "$line" ] && pass "journal: $line" || fail "systemd logged no 'Watchdog timeout'"

# ---- 7. stop drains ----------------------------------------------------------------------------
t=$(date +%s.%N)
systemctl stop nodewarden.service || fail "systemctl stop failed"
stop_s=$(since "$t")
result="$(prop ActiveState) result=$(prop Result) exit=$(prop ExecMainStatus)"
[ "$result" = "inactive result=success exit=0" ] && pass "systemctl stop in $stop_s s: $result" ||
  fail "after systemctl stop: $result"
log=$(agent_log | tail -n 5)
last=$(printf '%s\n' "$log" | tail -n 2 | tr '\n' '|')
if printf '%s\n' "$log" | grep -q ' stopping signal=SIGTERM' && printf '%s\n' "$log" | tail -n 1 | grep -q ' stopped '; then
  pass "journal: $last"
else
  fail "the journal does not end with stopping/stopped: $last"
fi

# ---- 8. purge (NODEWARDEN_VM_PURGE=1: dpkg reads its whole database again, 25-90 s under TCG) --
if [ "${NODEWARDEN_VM_PURGE:-0}" = 1 ]; then
  rm -f /etc/systemd/system/nodewarden.service.d/test.conf
  if dpkg --purge nodewarden >/tmp/dpkg.log 2>&1 && [ ! -e /etc/default/nodewarden ] &&
     ! systemctl is-enabled --quiet nodewarden.service 2>/dev/null; then
    pass "dpkg --purge: conffiles gone, the unit no longer known to systemd"
  else
    cat /tmp/dpkg.log
    fail "dpkg --purge"
  fi
fi

if [ "$status" != 0 ]; then
  echo "---- the unit's journal"
  journalctl -q -u nodewarden.service -o short-monotonic --no-pager | tail -n 60
fi
echo "systemd-unit.sh: $( [ "$status" = 0 ] && echo PASS || echo FAIL ) in $(since "$T0") s"
exit "$status"
