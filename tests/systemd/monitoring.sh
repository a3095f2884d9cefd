#!/bin/sh
# The monitoring component (systemd/kubernetes/components/monitoring) rendered with `kubectl
# kustomize`: five alerts, a dashboard that is valid JSON, and every nodewarden_* metric they
# query is one the agent or the webhook exports (their registrations in the source). Then
# promtool (Debian's prometheus package, which ./dev installs): `promtool check rules` on the
# PrometheusRule's spec and `promtool test rules` on tests/systemd/alerts_test.yaml, the
# alerts' unit tests (each alert fired and not fired by chosen series).
# Usage: monitoring.sh SOURCE_ROOT
# Exit 0: everything ran and passed. 1: a check failed. 77 (skipped, saying what did not
# run): kubectl or promtool is not installed — a failure of what did run still exits 1.
# promtool missing while the prometheus package is installed is a failure, not a skip.
set -u
root=$1
case $root in /*) ;; *) root=$(pwd)/$root ;; esac
status=0
skipped=""
fail() { echo "FAIL: $*" >&2; status=1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/nodewarden-monitoring.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
export KUBECONFIG="$work/no-kubeconfig"
component="$root/systemd/kubernetes/components/monitoring"

if command -v kubectl >/dev/null 2>&1; then
  if ! kubectl kustomize "$component" > "$work/out.yaml" 2> "$work/err"; then
    cat "$work/err" >&2
    fail "kubectl kustomize failed"
    exit 1
  fi
  grep -q 'grafana_dashboard: "1"' "$work/out.yaml" || fail "the dashboard ConfigMap lacks the grafana_dashboard label"
else
  # The rules and the metric names are still checked, on the component's source file (the
  # component patches nothing, so its PrometheusRule renders unchanged).
  echo "kubectl is not installed: checking prometheusrule.yaml as written, the rendering is not checked" >&2
  skipped="$skipped kubectl"
  cp "$component/prometheusrule.yaml" "$work/out.yaml"
fi

alerts=$(grep -c '^ *- alert: ' "$work/out.yaml")
[ "$alerts" -eq 5 ] || fail "expected 5 alerts, found $alerts"
for alert in NodewardenThresholdMet NodewardenEvictions NodewardenEvictionLatencyHigh \
             NodewardenAgentDown NodewardenWebhookFailingOpen; do
  grep -q "alert: $alert\$" "$work/out.yaml" || fail "alert $alert missing"
done
python3 -m json.tool "$component/dashboard.json" > /dev/null || fail "dashboard.json is not valid JSON"

# Every metric queried exists.
grep -rhoE '"nodewarden_[a-z_]+"' "$root/node" "$root/webhook" "$root/server" | tr -d '"' | sort -u > "$work/exported"
grep -ohE 'nodewarden_[a-z_]+' "$work/out.yaml" "$component/dashboard.json" | sed -E 's/_(bucket|count|sum)$//' | sort -u > "$work/queried"
while read -r metric; do
  grep -qxF "$metric" "$work/exported" || fail "$metric is queried but not exported"
done < "$work/queried"
echo "queried: $(tr '\n' ' ' < "$work/queried")"

# promtool: on PATH, else where Debian puts it.
promtool=$(command -v promtool 2>/dev/null || true)
[ -z "$promtool" ] && [ -x /usr/bin/promtool ] && promtool=/usr/bin/promtool
if [ -z "$promtool" ]; then
  if dpkg-query -W -f='${Status}' prometheus 2>/dev/null | grep -q 'install ok installed'; then
    fail "the prometheus package is installed but promtool is not found (PATH=$PATH)"
  else
    echo "promtool is not installed (./dev installs Debian's prometheus package): the rules were not checked or unit-tested by it" >&2
    skipped="$skipped promtool"
  fi
else
  "$promtool" --version 2>&1 | head -n 1
  # The PrometheusRule's spec is a Prometheus rules file.
  sed -n '/^kind: PrometheusRule/,/^---/p' "$work/out.yaml" | sed -n '/^spec:/,$p' | sed '1d; /^---/d; s/^  //' > "$work/rules.yaml"
  [ -s "$work/rules.yaml" ] || fail "no PrometheusRule spec found in the rendered component"
  "$promtool" check rules "$work/rules.yaml" || fail "promtool check rules"
  # The alerts' unit tests read rules.yaml beside them.
  cp "$root/tests/systemd/alerts_test.yaml" "$work/alerts_test.yaml" || fail "cannot copy alerts_test.yaml"
  "$promtool" test rules "$work/alerts_test.yaml" || fail "promtool test rules tests/systemd/alerts_test.yaml"
  # Every alert has unit tests.
  for alert in $(sed -n 's/^ *- alert: //p' "$work/rules.yaml"); do
    grep -q "alertname: $alert\$" "$work/alerts_test.yaml" || fail "alert $alert has no test in alerts_test.yaml"
  done
fi

if [ "$status" -ne 0 ]; then
  exit "$status"
fi
if [ -n "$skipped" ]; then
  echo "SKIP: not installed:$skipped (what ran passed)" >&2
  exit 77
fi
echo "PASS: the monitoring component"
exit 0
