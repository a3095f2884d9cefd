package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	kubelettypes "k8s.io/kubernetes/pkg/kubelet/types"

	"nodewarden.test/upstream/internal/scenario"
)

// What is compared, per case (tests/judges/README.md says the same for people):
//
// The kubelet's eviction manager runs over the case in phases. The hard phase starts at
// the case's time origin with its stats: one synchronize per cycle, a cycle one second after
// each kill (the cleanup wait), until a cycle kills nothing. The soft phase, when the policy
// has soft thresholds, starts when the longest grace period has passed since the origin
// (the soft thresholds met at the start have then been met for their grace period) and runs
// the same way. After each kill, the next cycle's inputs are the case with the killed pod
// gone (scenario.Case.Evict: Failed, its stats removed, what it used given back to the node).
// Then, after the transition period's half, one more cycle with the node relieved.
//
//   - eviction: at every cycle whose state nodewarden's stateless `explain` can represent
//     (the first one; and any cycle that does not follow a cycle in which a threshold with a
//     minimum reclaim acted, since the kubelet then keeps that threshold met up to threshold
//     + minimum reclaim), `explain eviction` on that cycle's inputs with ranking "kubelet"
//     and evictionMaxPodsPerCycle 1 (with --assume-grace-elapsed in the soft phase) evicts
//     the pod the kubelet killed, with its message, or nothing when it killed nothing. The
//     grace period is the kubelet's for soft thresholds; for hard ones the kubelet gives 1 s
//     (immediateEvictionGracePeriodSeconds) and nodewarden 0 (documented, docs/upstream.md).
//   - ranking: whenever the kubelet ranked pods (for memory, PIDs or ephemeral storage),
//     explain's ranking of that resource is the kubelet's order, with the pods it may not
//     evict (critical ones) moved last in their order, as nodewarden shows them.
//   - conditions: the node conditions the kubelet reports after the first cycle are
//     explain's; after later cycles explain's are among the kubelet's (which also holds
//     conditions for the transition period, and thresholds being reclaimed).
//   - prefix (documented difference: evicting just enough in one decision): `explain` on
//     a phase's first inputs with evictionMaxPodsPerCycle 10000 evicts, in one decision, the
//     pods the kubelet killed over the phase's cycles, in its order, with the same grace
//     periods; the first message is the kubelet's, the later ones differ from the kubelet's
//     only in the available amount (explain's is the phase's first).
//   - admission: after the first cycle, the manager's Admit (its admission handler) against
//     `explain admission` on the same inputs, the node's conditions derived from the stats;
//     after the relief cycle, with the conditions the kubelet publishes written into the
//     Node object (held for the transition period). A pod the kubelet rejects is rejected
//     with reason Evicted and the kubelet's message (its conditions in any order: the
//     kubelet lists them in map order); a pod it admits is not rejected for pressure.
//   - priority (documented difference: nodewarden's own ranking): on the first inputs,
//     ranking "priority" orders every ranking as docs/reference.md §4.4 says (computed here
//     from the same requests and usages), gives the same signals and conditions, and evicts
//     the first evictable pod of that order for the threshold the kubelet acted on; with one
//     threshold acting, the shortest prefix covering threshold + minimum reclaim − available.
//   - policy: the kubelet's parser and `check-policy` refuse a policy together; one the
//     kubelet takes and nodewarden refuses on purpose (a soft threshold with a 0s grace
//     period, a minimum reclaim over 100%, a negative evictionMaxPodGracePeriod) is refused
//     naming the key.

// report is the verdict on one case.
type report struct {
	c        *scenario.Case
	name     string
	compared map[string]int
	agreed   map[string]int
	diffs    []string
	notes    []string
	err      error
	runs     int
	// seen counts what the kubelet did, to say what the comparisons covered.
	seen map[string]int
	// stored: the case's pods as the API server stores them (Case.Stored).
	stored map[types.UID]*v1.Pod
}

func (r *report) check(kind string, ok bool, format string, args ...interface{}) bool {
	r.compared[kind]++
	if ok {
		r.agreed[kind]++
	} else {
		r.diffs = append(r.diffs, kind+": "+fmt.Sprintf(format, args...))
	}
	return ok
}

func (r *report) note(format string, args ...interface{}) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

const neverEvictPriority = 2000001000 // docs/reference.md §4.1 default

// judgeCase runs the kubelet and nodewarden on one case.
func judgeCase(c *scenario.Case, nw *nodewarden, name string) *report {
	r := &report{c: c, name: name, compared: map[string]int{}, agreed: map[string]int{}, seen: map[string]int{}}
	defer func() { r.runs = nw.runs }()
	if len(c.Nodes) == 0 {
		r.err = fmt.Errorf("the case has no node")
		return r
	}
	node := c.Nodes[0].Name
	policy := c.Judge.Policy
	cfg, kerr := scenario.KubeletConfig(policy)
	if kerr != nil {
		ok, _, err := nw.checkPolicy(policy)
		if err != nil {
			r.err = err
			return r
		}
		r.check("policy", !ok, "the kubelet refuses the policy (%v) but check-policy accepts it", kerr)
		return r
	}
	if why := refusedByNodewarden(policy); why != "" {
		// Documented (docs/upstream.md): the kubelet takes it, nodewarden refuses it.
		ok, msg, err := nw.checkPolicy(policy)
		if err != nil {
			r.err = err
			return r
		}
		r.check("policy", !ok && strings.Contains(msg, why), "the policy has %s: check-policy should refuse it naming %q, it says %q", why, why, msg)
		return r
	}
	var gmin, gmax time.Duration
	minReclaim := map[evictionapi.Signal]bool{}
	for _, t := range cfg.Thresholds {
		if t.GracePeriod > 0 && (gmin == 0 || t.GracePeriod < gmin) {
			gmin = t.GracePeriod
		}
		if t.GracePeriod > gmax {
			gmax = t.GracePeriod
		}
		if t.MinReclaim != nil && (t.MinReclaim.Quantity == nil || !t.MinReclaim.Quantity.IsZero()) &&
			(t.MinReclaim.Quantity != nil || t.MinReclaim.Percentage > 0) {
			minReclaim[t.Signal] = true
		}
	}
	stored, err := c.Stored()
	if err != nil {
		r.err = fmt.Errorf("the API server would not store the case's pods: %w", err)
		return r
	}
	r.stored = stored
	k, err := startKubelet(cfg, c.Judge.DedicatedImageFs, node, scenario.Epoch)
	if err != nil {
		r.err = err
		return r
	}
	defer k.stop()

	state := c.Clone()
	t := scenario.Epoch
	first := true
	phases := []bool{false}
	if gmax > 0 {
		phases = append(phases, true)
	}
	stopped := false
	var lastConditions []v1.NodeConditionType
	var agentCycles []agentCycle
	for _, soft := range phases {
		if stopped {
			break
		}
		phase := "hard"
		if soft {
			phase = "soft"
			start := scenario.Epoch.Add(gmax)
			if !start.After(t) {
				r.note("soft phase not run: the hard phase lasted past the longest grace period")
				break
			}
			t = start
		}
		phaseStart := state.Clone()
		var kills []kill
		var prevEligible []evictionapi.Signal
		for cycle := 0; ; cycle++ {
			if cycle > len(state.Pods)+1 {
				r.err = fmt.Errorf("the kubelet kept killing past the number of pods")
				return r
			}
			if !soft && gmin > 0 && !t.Before(scenario.Epoch.Add(gmin)) {
				r.note("stopped at %v: the hard phase reached the shortest grace period", t.Sub(scenario.Epoch))
				stopped = true
				break
			}
			state.Stamp(t)
			snap := state.Clone()
			snapJSON, err := snap.Snapshot()
			if err != nil {
				r.err = err
				return r
			}
			res, err := k.cycle(t, state.KubeletPods(node, stored), state.Stats[node])
			if err != nil {
				r.err = err
				return r
			}
			if amb := ambiguous(res.eligible); amb != "" {
				r.err = fmt.Errorf("cycle at +%v: the kubelet had several thresholds to choose from (%s); the generator should not make such cases", t.Sub(scenario.Epoch), amb)
				return r
			}
			lastConditions = res.conditions
			r.seen["cycles"]++
			agentCycles = append(agentCycles, agentCycle{at: t.Sub(scenario.Epoch), snapshot: snapJSON, res: res, soft: soft, tag: fmt.Sprintf("%s%d", phase, cycle)})
			for _, kl := range res.kills {
				resource := strings.TrimSuffix(strings.TrimPrefix(kl.status.Message, "The node was low on resource: "), ".")
				resource, _, _ = strings.Cut(resource, ".")
				r.seen[fmt.Sprintf("%s kills for %s", phase, resource)]++
			}
			tag := fmt.Sprintf("%s%d", phase, cycle)
			representable := first || !anyOf(prevEligible, minReclaim)
			out := r.compareCycle(nw, snapJSON, policy, res, soft, representable, first, tag)
			if first && out != nil {
				r.comparePriority(nw, snap, snapJSON, policy, cfg, out, tag)
				r.compareAdmissions(nw, k, snap, node, policy, res.conditions, false, tag, 2)
			}
			if r.err != nil {
				if first && strings.Contains(r.err.Error(), ".policy.json: ") {
					// explain refused the policy the kubelet's parser took.
					msg := r.err.Error()
					r.err = nil
					r.check("policy", false, "the kubelet takes the policy; nodewarden refuses it: %s", msg)
				}
				return r // the first error says it all
			}
			first = false
			prevEligible = res.eligible
			if len(res.kills) == 0 {
				if len(res.eligible) > 0 {
					r.seen["cases stopped: thresholds act, no pod the kubelet may evict"]++
					r.note("stopped: thresholds act but the kubelet has no pod it may evict")
					stopped = true
				}
				break
			}
			kills = append(kills, res.kills...)
			for _, kl := range res.kills {
				if err := state.Evict(node, scenario.PodKey(kl.pod), kl.status.Message); err != nil {
					r.err = err
					return r
				}
			}
			t = t.Add(time.Second)
		}
		if len(kills) > 0 {
			r.comparePrefix(nw, phaseStart, policy, kills, soft, phase)
		}
		if r.err != nil {
			return r
		}
		t = t.Add(10 * time.Second)
	}
	// Relief: half the transition period after the last cycle, the conditions the kubelet
	// holds, published in the Node object as its status setters would.
	if !stopped {
		wait := cfg.PressureTransitionPeriod / 2
		if wait < time.Second {
			wait = time.Second
		}
		t = t.Add(wait)
		state.Stamp(t)
		reliefJSON, err := state.Snapshot()
		if err != nil {
			r.err = err
			return r
		}
		res, err := k.cycle(t, state.KubeletPods(node, stored), state.Stats[node])
		if err != nil {
			r.err = err
			return r
		}
		agentCycles = append(agentCycles, agentCycle{at: t.Sub(scenario.Epoch), snapshot: reliefJSON, res: res, soft: false, tag: "relief"})
		if len(res.kills) > 0 {
			r.err = fmt.Errorf("the kubelet killed %s in the relief cycle", scenario.PodKey(res.kills[0].pod))
			return r
		}
		if len(lastConditions) > 0 || len(res.conditions) > 0 {
			snap := state.Clone()
			snap.PublishConditions(node, res.conditions, t)
			r.compareAdmissions(nw, k, snap, node, policy, res.conditions, true, "relief", 1)
		}
	}
	if r.err == nil {
		r.compareAgent(nw, nw.stepper, node, policy, cfg, agentCycles)
	}
	return r
}

// ambiguous says which thresholds the kubelet could pick among, if more than one: several
// memory ones, or several others with no memory one (see scenario.Eviction).
func ambiguous(eligible []evictionapi.Signal) string {
	var memory, other []string
	for _, s := range eligible {
		if scenario.IsMemorySignal(s) {
			memory = append(memory, string(s))
		} else {
			other = append(other, string(s))
		}
	}
	if len(memory) > 1 {
		return strings.Join(memory, ", ")
	}
	if len(memory) == 0 && len(other) > 1 {
		return strings.Join(other, ", ")
	}
	return ""
}

func anyOf(signals []evictionapi.Signal, set map[evictionapi.Signal]bool) bool {
	for _, s := range signals {
		if set[s] {
			return true
		}
	}
	return false
}

// compareCycle compares one cycle (eviction, ranking, conditions) and returns explain's
// answer in the kubelet's ranking, one pod per cycle.
func (r *report) compareCycle(nw *nodewarden, snapJSON []byte, policy scenario.Policy, res cycleResult, soft, representable, first bool, tag string) *evictionOut {
	if !representable {
		r.compared["eviction (not representable: a minimum reclaim in progress)"]++
		return nil
	}
	out, args, err := nw.explainEviction(tag, snapJSON, policy.With("kubelet", 1), soft)
	if err != nil {
		r.err = err
		return nil
	}
	where := fmt.Sprintf("cycle %s (%s)", tag, strings.Join(args, " "))
	switch {
	case len(res.kills) == 0 && len(out.Evict) == 0:
		r.check("eviction", true, "")
	case len(res.kills) == 0:
		r.check("eviction", false, "%s: the kubelet kills nothing; nodewarden evicts %s (%s)", where, out.Evict[0].Pod, out.Evict[0].Message)
	case len(out.Evict) == 0:
		kl := res.kills[0]
		r.check("eviction", false, "%s: the kubelet kills %s (%q); nodewarden evicts nothing", where, scenario.PodKey(kl.pod), kl.status.Message)
	default:
		kl, e := res.kills[0], out.Evict[0]
		want := kl.grace
		if !soft {
			// The kubelet's immediateEvictionGracePeriodSeconds (1); nodewarden's is 0.
			if kl.grace != 1 {
				r.check("eviction", false, "%s: the kubelet gave %s a hard-eviction grace period of %d s (expected 1)", where, scenario.PodKey(kl.pod), kl.grace)
			}
			want = 0
		}
		var problems []string
		if e.Pod != scenario.PodKey(kl.pod) {
			problems = append(problems, fmt.Sprintf("pod: kubelet %s, nodewarden %s", scenario.PodKey(kl.pod), e.Pod))
		}
		if e.GracePeriodSeconds != want {
			problems = append(problems, fmt.Sprintf("grace period: kubelet %d s (nodewarden's expected %d), nodewarden %d", kl.grace, want, e.GracePeriodSeconds))
		}
		if e.Message != kl.status.Message {
			problems = append(problems, fmt.Sprintf("message:\n      kubelet    %q\n      nodewarden %q", kl.status.Message, e.Message))
		}
		if kl.status.Reason != eviction.Reason || !kl.evicted {
			problems = append(problems, fmt.Sprintf("the kubelet's kill is not an eviction (reason %q)", kl.status.Reason))
		}
		r.check("eviction", len(problems) == 0, "%s: %s", where, strings.Join(problems, "; "))
	}
	// Ranking.
	if res.ranked != nil {
		resource := ""
		for _, e := range res.events {
			if e.node && e.reason == "EvictionThresholdMet" {
				resource = strings.TrimPrefix(e.message, "Attempting to reclaim ")
			}
		}
		if got, ok := out.Ranking[resource]; ok {
			var want, last []string
			for _, p := range res.ranked {
				if kubelettypes.IsCriticalPod(p) || (p.Spec.Priority != nil && *p.Spec.Priority >= neverEvictPriority) {
					last = append(last, scenario.PodKey(p))
				} else {
					want = append(want, scenario.PodKey(p))
				}
			}
			want = append(want, last...)
			r.check("ranking", equalStrings(got, want), "%s: %s ranking:\n      kubelet    %v (critical pods moved last)\n      nodewarden %v", where, resource, want, got)
		}
	}
	// Conditions.
	var kc []string
	for _, c := range res.conditions {
		kc = append(kc, string(c))
	}
	if first {
		r.check("conditions", sameSet(kc, out.Conditions), "%s: conditions: kubelet %v, nodewarden %v", where, kc, out.Conditions)
	} else {
		r.check("conditions", subset(out.Conditions, kc), "%s: conditions: nodewarden %v not among the kubelet's %v", where, out.Conditions, kc)
	}
	return out
}

var availableRe = regexp.MustCompile(`available: [^ ]+\. `)

// comparePrefix checks the documented difference of evictionMaxPodsPerCycle > 1: one
// decision on a phase's first inputs evicts what the kubelet killed over the phase.
func (r *report) comparePrefix(nw *nodewarden, phaseStart *scenario.Case, policy scenario.Policy, kills []kill, soft bool, phase string) {
	snapJSON, err := phaseStart.Snapshot()
	if err != nil {
		r.err = err
		return
	}
	out, args, err := nw.explainEviction(phase+"-prefix", snapJSON, policy.With("kubelet", 10000), soft)
	if err != nil {
		r.err = err
		return
	}
	var problems []string
	var kubelet, got []string
	for _, kl := range kills {
		kubelet = append(kubelet, scenario.PodKey(kl.pod))
	}
	for _, e := range out.Evict {
		got = append(got, e.Pod)
	}
	if !equalStrings(kubelet, got) {
		problems = append(problems, fmt.Sprintf("pods: kubelet over %d cycles %v, nodewarden at once %v", len(kills), kubelet, got))
	} else {
		for i, kl := range kills {
			e := out.Evict[i]
			want := kl.grace
			if !soft {
				want = 0
			}
			if e.GracePeriodSeconds != want {
				problems = append(problems, fmt.Sprintf("%s: grace period kubelet %d, nodewarden %d", e.Pod, kl.grace, e.GracePeriodSeconds))
			}
			km, nm := kl.status.Message, e.Message
			if i > 0 {
				km, nm = availableRe.ReplaceAllString(km, "available: A. "), availableRe.ReplaceAllString(nm, "available: A. ")
			}
			if km != nm {
				problems = append(problems, fmt.Sprintf("%s: message\n      kubelet    %q\n      nodewarden %q", e.Pod, kl.status.Message, e.Message))
			}
		}
	}
	r.check("prefix", len(problems) == 0, "%s phase (%s): %s", phase, strings.Join(args, " "), strings.Join(problems, "; "))
}

// compareAdmissions asks the manager's Admit and `explain admission` about up to `max` of
// the case's incoming pods (all of them when max is 0).
func (r *report) compareAdmissions(nw *nodewarden, k *kubelet, snap *scenario.Case, node string, policy scenario.Policy, conditions []v1.NodeConditionType, published bool, tag string, max int) {
	snapJSON, err := snap.Snapshot()
	if err != nil {
		r.err = err
		return
	}
	others := snap.KubeletPods(node, r.stored)
	incoming := snap.Judge.Incoming
	// Which ones: a choice fixed by the seed, so runs repeat.
	order := make([]int, len(incoming))
	for i := range order {
		order[i] = i
	}
	rng := scenario.NewRand(snap.Judge.Seed ^ uint64(len(tag))*0x9e3779b97f4a7c15)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	if max > 0 && len(order) > max {
		order = order[:max]
	}
	for _, i := range order {
		pod := incoming[i].DeepCopy()
		verdict := k.admitPod(scenario.AsStored(pod, r.stored), others)
		out, args, err := nw.explainAdmission(fmt.Sprintf("%s-admit-%s", tag, pod.Name), snapJSON, node, pod, policy)
		if err != nil {
			r.err = err
			return
		}
		source := "conditions derived from the stats"
		if published {
			source = "conditions published in the Node object"
		}
		where := fmt.Sprintf("%s, %s, kubelet conditions %v (%s)", pod.Name, source, conditions, strings.Join(args, " "))
		if verdict.Admit {
			r.seen["admissions admitted by the kubelet"]++
		} else {
			r.seen["admissions rejected by the kubelet"]++
		}
		if verdict.Admit {
			r.check("admission", out.Reason != "Evicted", "%s: the kubelet admits; nodewarden rejects: %s", where, out.Message)
			continue
		}
		ok := out.Verdict == "reject" && out.Reason == verdict.Reason && sameConditionMessage(out.Message, verdict.Message)
		r.check("admission", ok, "%s: the kubelet rejects (%s: %q); nodewarden: %s %s %q", where, verdict.Reason, verdict.Message, out.Verdict, out.Reason, out.Message)
	}
}

// sameConditionMessage compares "The node had condition: [A B]. " messages, the conditions
// in any order.
func sameConditionMessage(a, b string) bool {
	parse := func(s string) ([]string, bool) {
		const prefix, suffix = "The node had condition: [", "]. "
		if !strings.HasPrefix(s, prefix) || !strings.HasSuffix(s, suffix) {
			return nil, false
		}
		return strings.Fields(s[len(prefix) : len(s)-len(suffix)]), true
	}
	pa, oka := parse(a)
	pb, okb := parse(b)
	if !oka || !okb {
		return a == b
	}
	return sameSet(pa, pb)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool {
	x, y := append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	return equalStrings(x, y)
}

func subset(a, b []string) bool {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	for _, s := range a {
		if !in[s] {
			return false
		}
	}
	return true
}

// refusedByNodewarden names what in a policy the kubelet takes and nodewarden refuses on
// purpose (docs/upstream.md), as check-policy's message names it; "" when nothing.
func refusedByNodewarden(p scenario.Policy) string {
	if p.EvictionMaxPodGracePeriod != nil && *p.EvictionMaxPodGracePeriod < 0 {
		return "evictionMaxPodGracePeriod"
	}
	for _, text := range p.EvictionMinimumReclaim {
		if strings.HasSuffix(text, "%") {
			if f, err := strconv.ParseFloat(strings.TrimSuffix(text, "%"), 32); err == nil && float32(f)/100 > 1 {
				return "evictionMinimumReclaim"
			}
		}
	}
	for sig, grace := range p.EvictionSoftGracePeriod {
		if text, soft := p.EvictionSoft[sig]; soft && text != "0%" && text != "100%" {
			if d, err := time.ParseDuration(grace); err == nil && d == 0 {
				return "evictionSoftGracePeriod"
			}
		}
	}
	return ""
}
