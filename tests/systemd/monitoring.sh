#!/bin/sh
# The monitoring component (systemd/kubernetes/components/monitoring) rendered with `kubectl
# kustomize`: five alerts, a dashboard that is valid JSON, and every nodewarden_* metric they
# query is one the agent or the webhook exports (their registrations in the source). With
# promtool installed the rules are also checked by it. Exit 0 pass, 1 fail, 77 skip.
# Usage: monitoring.sh SOURCE_ROOT
set -u
root=$1
status=0
fail() { echo "FAIL: $*" >&2; status=1; }
if ! command -v kubectl >/dev/null 2>&1; then
  echo "SKIP: kubectl is not installed (it renders the kustomize component)" >&2
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/nodewarden-monitoring.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
component="$root/systemd/kubernetes/components/monitoring"
kubectl kustomize "$component" > "$work/out.yaml" 2> "$work/err" || { cat "$work/err" >&2; fail "kubectl kustomize failed"; exit 1; }

alerts=$(grep -c '^ *- alert: ' "$work/out.yaml")
[ "$alerts" -eq 5 ] || fail "expected 5 alerts, found $alerts"
for alert in NodewardenThresholdMet NodewardenEvictions NodewardenEvictionLatencyHigh \
             NodewardenAgentDown NodewardenWebhookFailingOpen; do
  grep -q "alert: $alert\$" "$work/out.yaml" || fail "alert $alert missing"
done
grep -q 'grafana_dashboard: "1"' "$work/out.yaml" || fail "the dashboard ConfigMap lacks the grafana_dashboard label"
python3 -m json.tool "$component/dashboard.json" > /dev/null || fail "dashboard.json is not valid JSON"

# Every metric queried exists.
grep -rhoE '"nodewarden_[a-z_]+"' "$root/node" "$root/webhook" "$root/server" | tr -d '"' | sort -u > "$work/exported"
grep -oE 'nodewarden_[a-z_]+' "$work/out.yaml" | sed -E 's/_(bucket|count|sum)$//' | sort -u > "$work/queried"
while read -r metric; do
  grep -qxF "$metric" "$work/exported" || fail "$metric is queried but not exported"
done < "$work/queried"
echo "queried: $(tr '\n' ' ' < "$work/queried")"

if command -v promtool >/dev/null 2>&1; then
  # The PrometheusRule's spec is a Prometheus rules file.
  sed -n '/^kind: PrometheusRule/,/^---/p' "$work/out.yaml" | sed -n '/^spec:/,$p' | sed '1d; /^---/d; s/^  //' > "$work/rules.yaml"
  promtool check rules "$work/rules.yaml" || fail "promtool check rules"
else
  echo "promtool is not installed: the rules were checked for structure and metric names only"
fi
[ "$status" -eq 0 ] && echo "PASS: the monitoring component"
exit "$status"
