package main

import (
	"fmt"
	"math/big"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	kubelettypes "k8s.io/kubernetes/pkg/kubelet/types"

	"nodewarden.test/upstream/internal/scenario"
)

// nodewarden's own ranking ("ranking": "priority", docs/reference.md §4.4), computed here
// from the documented rule, over the requests upstream's GetResourceRequestQuantity gives
// (scenario.EvictionRequest) and the usages of the summary.

type ranked struct {
	key       string
	priority  int32
	hasUsage  bool
	usage     int64
	request   int64
	evictable bool
	pod       *v1.Pod
}

// documentedRanking orders the node's pods (not terminating) for `signal`'s resource
// (memory, ephemeral storage, PIDs, inodes) as docs/reference.md §4.4 says for "priority":
// lowest priority first; pods without usage first within their priority; then usage ÷
// request, larger first, a zero request infinitely over (memory, ephemeral storage), or the
// larger count (pids, inodes); then the larger usage; then the pod key. Pods that may not be
// evicted last, in that order.
func documentedRanking(c *scenario.Case, stored map[types.UID]*v1.Pod, node string, signal evictionapi.Signal) []ranked {
	resourceName := resourceOf(string(signal))
	stats := map[string]*statsapi.PodStats{}
	if s := c.Stats[node]; s != nil {
		for i := range s.Pods {
			stats[s.Pods[i].PodRef.UID] = &s.Pods[i]
		}
	}
	var out []ranked
	for i := range c.Pods {
		if !scenario.KubeletActive(&c.Pods[i], node) {
			continue
		}
		p := scenario.AsStored(&c.Pods[i], stored)
		r := ranked{key: scenario.PodKey(p), pod: p}
		if p.Spec.Priority != nil {
			r.priority = *p.Spec.Priority
		}
		r.evictable = !kubelettypes.IsCriticalPod(p) && r.priority < neverEvictPriority
		if ps := stats[string(p.UID)]; ps != nil {
			r.usage, r.hasUsage = usageOf(p, ps, signal, c.Judge.DedicatedImageFs), true
		}
		switch resourceName {
		case "memory":
			r.request = scenario.EvictionRequest(p, v1.ResourceMemory)
		case "ephemeral-storage":
			r.request = scenario.EvictionRequest(p, v1.ResourceEphemeralStorage)
		}
		out = append(out, r)
	}
	withRequest := resourceName == "memory" || resourceName == "ephemeral-storage"
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		if a.hasUsage != b.hasUsage {
			return !a.hasUsage
		}
		if a.hasUsage && withRequest {
			if c := ratioCmp(a, b); c != 0 {
				return c > 0
			}
		}
		if a.usage != b.usage {
			return a.usage > b.usage
		}
		return a.key < b.key
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].evictable && !out[j].evictable })
	return out
}

// ratioCmp compares usage ÷ request: positive when a's is larger; a zero request is
// infinitely over.
func ratioCmp(a, b ranked) int {
	aInf, bInf := a.request == 0, b.request == 0
	if aInf || bInf {
		switch {
		case aInf && bInf:
			return 0
		case aInf:
			return 1
		default:
			return -1
		}
	}
	l := new(big.Int).Mul(big.NewInt(a.usage), big.NewInt(b.request))
	r := new(big.Int).Mul(big.NewInt(b.usage), big.NewInt(a.request))
	return l.Cmp(r)
}

// usageOf is a pod's usage as docs/reference.md §4.4 counts it: the working set, the process
// count, or its usage of the signal's filesystem as the kubelet measures it; a figure the
// pod's stats lack counts 0.
func usageOf(pod *v1.Pod, ps *statsapi.PodStats, signal evictionapi.Signal, dedicated bool) int64 {
	switch resourceOf(string(signal)) {
	case "memory":
		if ps.Memory != nil && ps.Memory.WorkingSetBytes != nil {
			return int64(*ps.Memory.WorkingSetBytes)
		}
		return 0
	case "pids":
		if ps.ProcessStats != nil && ps.ProcessStats.ProcessCount != nil {
			return int64(*ps.ProcessStats.ProcessCount)
		}
		return 0
	}
	return scenario.DiskUsage(pod, ps, signal, dedicated)
}

func resourceOf(signal string) string {
	switch evictionapi.Signal(signal) {
	case evictionapi.SignalMemoryAvailable, evictionapi.SignalAllocatableMemoryAvailable:
		return "memory"
	case evictionapi.SignalPIDAvailable:
		return "pids"
	case evictionapi.SignalNodeFsInodesFree, evictionapi.SignalImageFsInodesFree:
		return "inodes"
	}
	return "ephemeral-storage"
}

// nodePart is the first two sentences of an eviction message: the resource, the threshold
// and what is available.
func nodePart(message string) string {
	parts := strings.SplitAfterN(message, ". ", 3)
	if len(parts) < 2 {
		return message
	}
	return parts[0] + parts[1]
}

// comparePriority checks nodewarden's own ranking mode on the first inputs of a case
// against the documented rule and the kubelet-mode answer `kubeletMode` of the same inputs.
func (r *report) comparePriority(nw *nodewarden, snap *scenario.Case, snapJSON []byte, policy scenario.Policy, cfg eviction.Config, kubeletMode *evictionOut, tag string) {
	node := snap.Nodes[0].Name
	one, args, err := nw.explainEviction(tag+"-priority", snapJSON, policy.With("priority", 1), false)
	if err != nil {
		r.err = err
		return
	}
	var problems []string
	// The same signals and conditions: the ranking mode changes only the order.
	if fmt.Sprint(one.Signals) != fmt.Sprint(kubeletMode.Signals) || !sameSet(one.Conditions, kubeletMode.Conditions) {
		problems = append(problems, fmt.Sprintf("signals or conditions differ from the kubelet mode's: %v %v vs %v %v", one.Signals, one.Conditions, kubeletMode.Signals, kubeletMode.Conditions))
	}
	// Every ranking in the documented order; the ephemeral-storage one measures for the
	// first disk threshold that acts, else for nodefs.available (docs/reference.md §4.7).
	disk := evictionapi.SignalNodeFsAvailable
	for _, s := range []evictionapi.Signal{evictionapi.SignalNodeFsAvailable, evictionapi.SignalImageFsAvailable} {
		if acts(kubeletMode, string(s)) {
			disk = s
			break
		}
	}
	for resourceName, got := range one.Ranking {
		signal := map[string]evictionapi.Signal{"memory": evictionapi.SignalMemoryAvailable,
			"pids": evictionapi.SignalPIDAvailable, "ephemeral-storage": disk}[resourceName]
		var want []string
		for _, p := range documentedRanking(snap, r.stored, node, signal) {
			want = append(want, p.key)
		}
		if !equalStrings(got, want) {
			problems = append(problems, fmt.Sprintf("%s ranking:\n      documented %v\n      nodewarden %v", resourceName, want, got))
		}
	}
	// One pod: the first evictable pod of the order, for the threshold the kubelet acted on.
	switch {
	case len(kubeletMode.Evict) == 0:
		if len(one.Evict) != 0 {
			problems = append(problems, fmt.Sprintf("the kubelet mode evicts nothing, the priority mode %s", one.Evict[0].Pod))
		}
	case len(one.Evict) != 1:
		problems = append(problems, fmt.Sprintf("the kubelet mode evicts %s, the priority mode %d pods", kubeletMode.Evict[0].Pod, len(one.Evict)))
	default:
		k, e := kubeletMode.Evict[0], one.Evict[0]
		want := ""
		for _, p := range documentedRanking(snap, r.stored, node, evictionapi.Signal(k.Signal)) {
			if p.evictable {
				want = p.key
				break
			}
		}
		if e.Signal != k.Signal || e.Pod != want || nodePart(e.Message) != nodePart(k.Message) || e.GracePeriodSeconds != 0 {
			problems = append(problems, fmt.Sprintf("evicts %s for %s (grace %d, %q); documented: %s for %s (grace 0, %q)", e.Pod, e.Signal, e.GracePeriodSeconds, nodePart(e.Message), want, k.Signal, nodePart(k.Message)))
		}
	}
	r.check("priority", len(problems) == 0, "%s: %s", strings.Join(args, " "), strings.Join(problems, "; "))

	// Just enough: with one threshold acting, the shortest prefix that covers its need.
	var acting []string
	for _, s := range kubeletMode.Signals {
		if s.Met && s.Kind == "hard" {
			acting = append(acting, s.Signal)
		}
	}
	if len(acting) != 1 || len(kubeletMode.Evict) == 0 {
		return
	}
	all, args, err := nw.explainEviction(tag+"-priority-all", snapJSON, policy.With("priority", 10000), false)
	if err != nil {
		r.err = err
		return
	}
	var sig struct{ threshold, available, capacity int64 }
	for _, s := range kubeletMode.Signals {
		if s.Signal == acting[0] && s.Kind == "hard" {
			sig.threshold, sig.available, sig.capacity = s.Threshold, s.Available, s.Capacity
		}
	}
	need := new(big.Int).SetInt64(sig.threshold)
	for _, t := range cfg.Thresholds {
		if string(t.Signal) == acting[0] && t.GracePeriod == 0 && t.MinReclaim != nil {
			need.Add(need, big.NewInt(evictionapi.GetThresholdQuantity(*t.MinReclaim, resource.NewQuantity(sig.capacity, resource.DecimalSI)).Value()))
		}
	}
	need.Sub(need, big.NewInt(sig.available))
	var want, got []string
	for _, p := range documentedRanking(snap, r.stored, node, evictionapi.Signal(acting[0])) {
		if need.Sign() <= 0 {
			break
		}
		if !p.evictable {
			continue
		}
		want = append(want, p.key)
		if p.hasUsage {
			need.Sub(need, big.NewInt(p.usage))
		}
	}
	for _, e := range all.Evict {
		got = append(got, e.Pod)
	}
	r.check("priority", equalStrings(got, want), "%s: just enough for %s: documented %v, nodewarden %v", strings.Join(args, " "), acting[0], want, got)
}

// acts is true when explain shows a hard threshold of `signal` met (without
// --assume-grace-elapsed, the thresholds that act).
func acts(out *evictionOut, signal string) bool {
	for _, s := range out.Signals {
		if s.Signal == signal && s.Met && s.Kind == "hard" {
			return true
		}
	}
	return false
}
