package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"

	"nodewarden.test/upstream/internal/scenario"
)

// nodewarden asks the real CLI through one `nodewarden explain --batch -` process per worker
// (each question answered exactly as the command alone answers it).
type nodewarden struct {
	bin string
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func (n *nodewarden) ask(args []string) (string, error) {
	if n.cmd == nil {
		cmd := exec.Command(n.bin, "explain", "--batch", "-")
		in, err := cmd.StdinPipe()
		if err != nil {
			return "", err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return "", err
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return "", err
		}
		n.cmd, n.in, n.out = cmd, in, bufio.NewReaderSize(out, 1<<20)
	}
	line, _ := json.Marshal(args)
	if _, err := n.in.Write(append(line, '\n')); err != nil {
		n.close()
		return "", err
	}
	reply, err := n.out.ReadBytes('\n')
	if err != nil {
		n.close()
		return "", fmt.Errorf("nodewarden explain --batch: no answer to %s: %w", line, err)
	}
	var r struct {
		Exit   int    `json:"exit"`
		Stdout string `json:"stdout"`
		Stderr string `json:"stderr"`
	}
	if err := json.Unmarshal(reply, &r); err != nil {
		return "", err
	}
	if r.Exit != 0 {
		return "", fmt.Errorf("nodewarden explain %s: exit %d: %s", strings.Join(args, " "), r.Exit, strings.TrimSpace(r.Stderr))
	}
	return r.Stdout, nil
}

func (n *nodewarden) close() {
	if n.cmd != nil {
		n.in.Close()
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}

// preemptionOut is `explain preemption -o json` (docs/reference.md, cluster preemption).
type preemptionOut struct {
	Pod              string      `json:"pod"`
	Node             *string     `json:"node"`
	Victims          []string    `json:"victims"`
	NumPDBViolations int         `json:"numPDBViolations"`
	Candidates       []candidate `json:"candidates"`
}

type candidate struct {
	Node             string   `json:"node"`
	Victims          []string `json:"victims"`
	NumPDBViolations int      `json:"numPDBViolations"`
}

type admissionOut struct {
	Verdict string   `json:"verdict"`
	Reason  string   `json:"reason"`
	Victims []string `json:"victims"`
}

type result struct {
	scheduler *outcome
	problems  []string
	commands  []string
	caseFile  string
	tie       bool // several nodes were acceptable answers
	// Nodes where explain admission admits the preemptor but the scheduler's request sets
	// leave no room, because a pod there is resizing (see schedulerFitsResources).
	setDifference []string
	// explain agrees only once pods the scheduler cannot tell apart are taken in another
	// order (see agreesInSomeTieOrder).
	victimTie bool
}

// judge runs one scenario on the cluster and compares.
func judge(ctx context.Context, cs *kubernetes.Clientset, nw *nodewarden, c *scenario.PreemptionCase, outDir string) (*result, error) {
	r := &scenarioRun{cs: cs, c: c}
	defer r.tearDown(context.Background())
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	if err := r.snapshot(ctx); err != nil {
		return nil, err
	}
	sched, err := r.submit(ctx)
	if err != nil {
		return nil, err
	}
	res := &result{scheduler: sched}

	dir := filepath.Join(outDir, c.Prefix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	snapPath := filepath.Join(dir, "snapshot.json")
	podPath := filepath.Join(dir, "preemptor.json")
	// The preemptor as the API server stored it, except that a pod written without a
	// priorityClassName is given as written: explain resolves its priority and
	// preemptionPolicy from the snapshot's classes (the global default, when there is one),
	// as the Priority admission plugin did.
	given := r.Preemptor.DeepCopy()
	if c.Preemptor.Spec.PriorityClassName == "" {
		given.Spec.PriorityClassName, given.Spec.Priority, given.Spec.PreemptionPolicy = "", nil, nil
	}
	preemptor, _ := json.MarshalIndent(given, "", " ")
	if err := os.WriteFile(snapPath, r.Snapshot, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(podPath, preemptor, 0o644); err != nil {
		return nil, err
	}
	res.commands = append(res.commands, "nodewarden explain "+strings.Join([]string{"preemption", "--snapshot", snapPath, "--pod", podPath, "-o", "json"}, " "))
	pre, admission, err := r.explain(nw, snapPath, podPath)
	if err != nil {
		return nil, err
	}
	res.compare(r, pre, admission)
	if len(res.problems) > 0 && sched.Kind == "preempted" {
		alt, err := r.agreesInSomeTieOrder(nw, dir, podPath, sched)
		if err != nil {
			return nil, err
		}
		if alt != nil {
			res = alt
			res.victimTie = true
		}
	}
	if len(res.problems) > 0 {
		// The case file: the generated case, with the snapshot and pod explain ran on beside it.
		data, _ := json.MarshalIndent(c, "", " ")
		res.caseFile = filepath.Join(dir, "preemption-"+c.Prefix+".json")
		_ = os.WriteFile(res.caseFile, data, 0o644)
		res.commands = append(res.commands, fmt.Sprintf("the scheduler again: preempt-judge --case %s (or --seed %d --cases 1)", res.caseFile, c.Seed))
	} else {
		_ = os.RemoveAll(dir)
	}
	return res, nil
}

// schedulerFilters says whether the node passes the scheduler's filters that `explain
// admission` does not apply to a pod already bound: NoSchedule taints (admission checks
// NoExecute ones only) and spec.unschedulable.
func schedulerOnlyFilters(node *v1.Node, pod *v1.Pod) bool {
	taints := node.Spec.Taints
	if node.Spec.Unschedulable {
		// The NodeUnschedulable plugin: a pod that tolerates this taint may go there.
		taints = append(slices.Clone(taints), v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
	}
	_, untolerated := v1helper.FindMatchingUntoleratedTaint(klog.Background(), taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, true)
	return !untolerated
}

// schedulerFitsResources says whether the preemptor fits the node's resources as the
// scheduler counts them: upstream's own NodeInfo (each pod's requests from
// PodInfo.CalculateResource, which counts a resized pod's max(desired, allocated, actual))
// and the NodeResourcesFit plugin's Fits. `explain admission` answers for the kubelet, which
// counts a resized pod's max(allocated, actual) (docs/reference.md §3.3, "three request
// sets"), so a node can admit a bound pod that the scheduler would not place there.
func schedulerFitsResources(node *v1.Node, pods []v1.Pod, pod *v1.Pod) bool {
	var on []*v1.Pod
	for i := range pods {
		if pods[i].Spec.NodeName == node.Name {
			on = append(on, &pods[i])
		}
	}
	ni := framework.NewNodeInfo(on...)
	ni.SetNode(node)
	return len(noderesources.Fits(pod, ni, nil, noderesources.ResourceRequestsOptions{
		EnablePodLevelResources: true,
	})) == 0
}

// resizingOn says whether a pod on `node` has a resize pending or under way: only then may
// the kubelet's and the scheduler's request sets differ.
func resizingOn(pods []v1.Pod, node string) bool {
	for i := range pods {
		if pods[i].Spec.NodeName != node {
			continue
		}
		for _, c := range pods[i].Status.Conditions {
			if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
				return true
			}
		}
	}
	return false
}

func (res *result) problem(format string, args ...any) {
	res.problems = append(res.problems, fmt.Sprintf(format, args...))
}

func (res *result) compare(r *scenarioRun, pre *preemptionOut, admission map[string]*admissionOut) {
	s := res.scheduler
	nodes := map[string]*v1.Node{}
	var names []string
	for i := range r.nodes {
		nodes[r.nodes[i].Name] = &r.nodes[i]
		names = append(names, r.nodes[i].Name)
	}
	sort.Strings(names)
	// The nodes where the preemptor fits as it is: admission admits it there, the
	// scheduler's own filters pass and its resources fit as the scheduler counts them.
	// Where admission admits and only the scheduler's count of a resized pod stands in the
	// way, that is the documented difference between the two request sets, not a
	// disagreement (setDifference counts those nodes).
	var fits []string
	for _, name := range names {
		if admission[name].Verdict != "admit" || !schedulerOnlyFilters(nodes[name], r.Preemptor) {
			continue
		}
		if schedulerFitsResources(nodes[name], r.pods, r.Preemptor) {
			fits = append(fits, name)
		} else if resizingOn(r.pods, name) {
			res.setDifference = append(res.setDifference, name)
		} else {
			res.problem("explain admission admits it on %s, where the scheduler's NodeResourcesFit finds it does not fit and no pod is resizing", name)
		}
	}
	explainNode := ""
	if pre.Node != nil {
		explainNode = *pre.Node
	}
	switch s.Kind {
	case "bound":
		// Which fitting node the scheduler takes is its scoring's (and, between equal
		// scores, random) choice, which nodewarden does not model: any node where the pod
		// fits is an acceptable answer, and so is explain's, when it names one of them.
		res.tie = len(fits) > 1
		if !slices.Contains(fits, s.Node) {
			res.problem("explain admission does not admit it on %s (verdict %s %s); it admits it on %v", s.Node, admission[s.Node].Verdict, admission[s.Node].Reason, fits)
		}
		if explainNode == "" || len(pre.Victims) > 0 || !slices.Contains(fits, explainNode) {
			res.problem("explain preemption says node %q with victims %v (fits: %v)", explainNode, pre.Victims, fits)
		}
	case "unschedulable":
		if explainNode != "" {
			res.problem("explain preemption says node %s with victims %v", explainNode, pre.Victims)
		}
		for _, name := range names {
			a := admission[name]
			if slices.Contains(res.setDifference, name) {
				continue
			}
			if (a.Verdict == "admit" || a.Verdict == "preempt") && schedulerOnlyFilters(nodes[name], r.Preemptor) {
				res.problem("explain admission on %s: %s %v", name, a.Verdict, a.Victims)
			}
		}
	case "preempted":
		if len(fits) > 0 {
			res.problem("explain admission admits it as it is on %v", fits)
		}
		if explainNode == "" {
			res.problem("explain preemption preempts nothing")
			return
		}
		// Every candidate explain found, the chosen one first; the scheduler's node must be
		// one of those pickOneNodeForPreemption cannot tell from explain's choice (the
		// scheduler then takes whichever its parallel evaluation listed first), with the
		// same victims.
		all := append([]candidate{{Node: explainNode, Victims: pre.Victims, NumPDBViolations: pre.NumPDBViolations}}, pre.Candidates...)
		byNode := map[string]candidate{}
		for _, cand := range all {
			byNode[cand.Node] = cand
		}
		pods := map[string]*v1.Pod{}
		for i := range r.pods {
			pods[scenario.PodKey(&r.pods[i])] = &r.pods[i]
		}
		best := rank(byNode[explainNode], pods)
		var tied []string
		for node, cand := range byNode {
			k := rank(cand, pods)
			if less(k, best) {
				res.problem("explain chose %s (%v) but candidate %s (%v) ranks first by pickOneNodeForPreemption", explainNode, best, node, k)
			}
			if k == best {
				tied = append(tied, node)
			}
		}
		sort.Strings(tied)
		res.tie = len(tied) > 1
		cand, ok := byNode[s.Nominated]
		if !ok {
			res.problem("explain preemption chose %s %v; %s is not among its candidates %v", explainNode, pre.Victims, s.Nominated, pre.Candidates)
			return
		}
		if !slices.Contains(tied, s.Nominated) {
			res.problem("explain preemption chose %s %v, the scheduler's %s ranks after it (acceptable: %v)", explainNode, pre.Victims, s.Nominated, tied)
		}
		victims := slices.Clone(cand.Victims)
		sort.Strings(victims)
		if !slices.Equal(victims, s.Victims) {
			res.problem("on %s explain's victims are %v", s.Nominated, victims)
		}
		if a := admission[s.Nominated]; a.Verdict == "wait" && terminatingOn(r.pods, s.Nominated) {
			// Documented difference (docs/upstream.md): a pod bound to a node waits there for
			// its terminating pods (the kubelet's side); the scheduler preempts.
		} else if a.Verdict == "admit" && slices.Contains(res.setDifference, s.Nominated) {
			// Documented difference (docs/reference.md §3.3): the kubelet's request sets
			// leave room for it there, the scheduler's do not.
		} else if a.Verdict != "preempt" {
			res.problem("explain admission on %s: %s %s", s.Nominated, a.Verdict, a.Reason)
		} else if v := slices.Sorted(slices.Values(a.Victims)); !slices.Equal(v, s.Victims) {
			res.problem("explain admission on %s preempts %v", s.Nominated, v)
		}
	}
}

// key is pickOneNodeForPreemption's order (pkg/scheduler/framework/preemption), smaller first.
type key struct {
	pdb, numVictims int
	highest         int64
	sum             int64
	start           int64 // minus the earliest start time of the highest-priority victims
}

func less(a, b key) bool {
	if a.pdb != b.pdb {
		return a.pdb < b.pdb
	}
	if a.highest != b.highest {
		return a.highest < b.highest
	}
	if a.sum != b.sum {
		return a.sum < b.sum
	}
	if a.numVictims != b.numVictims {
		return a.numVictims < b.numVictims
	}
	return a.start < b.start
}

func rank(c candidate, pods map[string]*v1.Pod) key {
	k := key{pdb: c.NumPDBViolations, numVictims: len(c.Victims), highest: math.MinInt64}
	for _, v := range c.Victims {
		p := pods[v]
		prio := int64(0)
		if p != nil && p.Spec.Priority != nil {
			prio = int64(*p.Spec.Priority)
		}
		k.sum += prio + math.MaxInt32 + 1
		if prio > k.highest {
			k.highest = prio
		}
	}
	earliest := time.Time{}
	for _, v := range c.Victims {
		p := pods[v]
		if p == nil || p.Spec.Priority == nil || int64(*p.Spec.Priority) != k.highest || p.Status.StartTime == nil {
			continue
		}
		if earliest.IsZero() || p.Status.StartTime.Time.Before(earliest) {
			earliest = p.Status.StartTime.Time
		}
	}
	k.start = -earliest.Unix()
	return k
}

// terminatingOn says whether a pod on `node` is terminating.
func terminatingOn(pods []v1.Pod, node string) bool {
	for i := range pods {
		if pods[i].Spec.NodeName == node && pods[i].DeletionTimestamp != nil {
			return true
		}
	}
	return false
}

// explain asks `explain preemption` and `explain admission` on every node of the scenario.
func (r *scenarioRun) explain(nw *nodewarden, snapPath, podPath string) (*preemptionOut, map[string]*admissionOut, error) {
	text, err := nw.ask([]string{"preemption", "--snapshot", snapPath, "--pod", podPath, "-o", "json"})
	if err != nil {
		return nil, nil, err
	}
	var pre preemptionOut
	if err := json.Unmarshal([]byte(text), &pre); err != nil {
		return nil, nil, fmt.Errorf("explain preemption -o json: %w", err)
	}
	admission := map[string]*admissionOut{}
	for _, node := range r.nodes {
		text, err := nw.ask([]string{"admission", "--snapshot", snapPath, "--node", node.Name, "--pod", podPath, "-o", "json"})
		if err != nil {
			return nil, nil, err
		}
		var a admissionOut
		if err := json.Unmarshal([]byte(text), &a); err != nil {
			return nil, nil, fmt.Errorf("explain admission -o json: %w", err)
		}
		admission[node.Name] = &a
	}
	return &pre, admission, nil
}

// agreesInSomeTieOrder judges the scenario again with the ties among the pods the preemptor
// may preempt broken in each other order, and returns the first result that agrees (nil when
// none does). The scheduler's SelectVictimsOnNode sorts those pods by MoreImportantPod
// (higher priority, then the earlier start) with sort.Slice, so pods equal under it stay in
// the order of its cache's NodeInfo.Pods: the order their add events came in, reshuffled by
// every update (the cache removes the old pod, moving the last one into its place, and
// appends the new one), which no snapshot states; explain breaks such ties by pod key. Which
// of two tied pods is kept can change the victims on a node, and with them the node
// pickOneNodeForPreemption takes. For each order of each group of tied pods, on every node
// (at most 720 orders in all), their start times are moved apart by microseconds in that
// order: the API states start times in whole seconds, so nothing else changes order.
func (r *scenarioRun) agreesInSomeTieOrder(nw *nodewarden, dir, podPath string, sched *outcome) (*result, error) {
	if r.Preemptor.Spec.Priority == nil {
		return nil, nil
	}
	type tieKey struct {
		node     string
		priority int32
		start    time.Time
	}
	groups := map[tieKey][]string{}
	for i := range r.pods {
		p := &r.pods[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.StartTime == nil {
			continue
		}
		priority := int32(0)
		if p.Spec.Priority != nil {
			priority = *p.Spec.Priority
		}
		if priority >= *r.Preemptor.Spec.Priority {
			continue
		}
		k := tieKey{p.Spec.NodeName, priority, p.Status.StartTime.Time}
		groups[k] = append(groups[k], scenario.PodKey(p))
	}
	var tied [][]string
	orders := 1
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		sort.Strings(g)
		tied = append(tied, g)
		for n := 2; n <= len(g); n++ {
			orders *= n
		}
	}
	sort.Slice(tied, func(i, j int) bool { return tied[i][0] < tied[j][0] })
	if len(tied) == 0 || orders > 720 {
		return nil, nil
	}
	var snap map[string]any
	if err := json.Unmarshal(r.Snapshot, &snap); err != nil {
		return nil, err
	}
	pods, _ := snap["pods"].([]any)
	byKey := map[string]map[string]any{}
	starts := map[string]time.Time{} // as the snapshot states them
	for _, item := range pods {
		p, _ := item.(map[string]any)
		meta, _ := p["metadata"].(map[string]any)
		status, _ := p["status"].(map[string]any)
		if meta == nil || status == nil {
			continue
		}
		key := fmt.Sprintf("%v/%v", meta["namespace"], meta["name"])
		byKey[key] = status
		if text, ok := status["startTime"].(string); ok {
			start, err := time.Parse(time.RFC3339, text)
			if err != nil {
				return nil, fmt.Errorf("%s: startTime: %w", key, err)
			}
			starts[key] = start
		}
	}
	path := filepath.Join(dir, "snapshot-tie-order.json")
	defer os.Remove(path)
	// Every combination of one permutation per group; the first, each group in key order,
	// is explain's own and was judged already.
	perms := make([][][]string, len(tied))
	for i, g := range tied {
		perms[i] = permutations(g)
	}
	choice := make([]int, len(tied))
	for {
		i := 0
		for ; i < len(choice); i++ {
			choice[i]++
			if choice[i] < len(perms[i]) {
				break
			}
			choice[i] = 0
		}
		if i == len(choice) {
			return nil, nil
		}
		for i, g := range perms {
			for place, key := range g[choice[i]] {
				byKey[key]["startTime"] = starts[key].Add(time.Duration(place) * time.Microsecond).UTC().Format("2006-01-02T15:04:05.000000Z07:00")
			}
		}
		data, err := json.Marshal(snap)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, err
		}
		pre, admission, err := r.explain(nw, path, podPath)
		if err != nil {
			return nil, err
		}
		alt := &result{scheduler: sched}
		alt.compare(r, pre, admission)
		if len(alt.problems) == 0 {
			return alt, nil
		}
	}
}

// permutations lists every order of `items`, `items` itself first.
func permutations(items []string) [][]string {
	if len(items) <= 1 {
		return [][]string{slices.Clone(items)}
	}
	var out [][]string
	for i := range items {
		rest := append(slices.Clone(items[:i]), items[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{items[i]}, p...))
		}
	}
	return out
}
