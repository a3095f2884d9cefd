package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"

	"nodewarden.test/upstream/internal/scenario"
)

// The agent's own decision (tests/judges/agent_stepper.cpp): node::Agent, with its own
// state across cycles (soft thresholds' grace periods on its clock, minimum reclaims in
// progress, the transition period, one victim at a time while one is exiting), run over the
// cycles the kubelet's manager ran, at the same clock times, on each cycle's inputs laid out
// as files. It is compared at every cycle, those explain cannot represent included:
//
//   - agent: the agent orders the pod the kubelet killed in that cycle (nothing when it killed
//     nothing), for a threshold of the phase's kind (hard, soft), with the kubelet's message;
//     the grace period is the kubelet's for a soft threshold, 0 where the kubelet gives 1 s for
//     a hard one (documented); and MemoryPressure after the cycle as the kubelet reports it
//     (held for the transition period by both). The message's container part too: the
//     stepper lays out each container's cgroup below its pod's, named by a runtime ID it gives
//     the container's status, and the agent reads the victim's (docs/upstream.md).
//
// What cannot be laid out as files is not compared (the stepper says why): the filesystem
// and PID signals, which the agent reads with statvfs(2) and sysinfo(2), so a case's cycles
// are compared up to the first in which the kubelet acted on such a threshold; a pod the
// summary does not list; a node memory capacity that is not a whole number of KiB when the
// policy states a percentage of it.

// agentCycle is one kubelet cycle as the agent is given it.
type agentCycle struct {
	at       time.Duration // since scenario.Epoch
	snapshot []byte
	res      cycleResult
	soft     bool
	tag      string
}

// agentLine is one line of the stepper's output.
type agentLine struct {
	Cycle       int      `json:"cycle"`
	AtMs        int64    `json:"atMs"`
	AgentCycles int      `json:"agentCycles"`
	Conditions  []string `json:"conditions"`
	Evict       []struct {
		Pod                string `json:"pod"`
		Signal             string `json:"signal"`
		Kind               string `json:"kind"`
		GracePeriodSeconds int64  `json:"gracePeriodSeconds"`
		Message            string `json:"message"`
	} `json:"evict"`
}

// actedOnOther: the kubelet acted on a threshold of a signal that is not a memory one (it
// acts on memory first when one is among them).
func actedOnOther(eligible []evictionapi.Signal) bool {
	if len(eligible) == 0 {
		return false
	}
	for _, s := range eligible {
		if scenario.IsMemorySignal(s) {
			return false
		}
	}
	return true
}

// compareAgent runs the stepper over the cycles and compares each with the kubelet's.
func (r *report) compareAgent(nw *nodewarden, stepper, node string, policy scenario.Policy, cfg eviction.Config, cycles []agentCycle) {
	if stepper == "" || len(cycles) == 0 {
		return
	}
	// The cycles the agent can be given: up to the first the kubelet spent on a threshold
	// whose signal cannot be laid out as files.
	given := cycles
	for i, c := range cycles {
		if actedOnOther(c.res.eligible) {
			given = cycles[:i]
			r.compared["agent (not compared: the kubelet acted on a filesystem or PID threshold, which the agent reads from statvfs(2) and sysinfo(2), not files)"] += len(cycles) - i
			break
		}
	}
	if len(given) == 0 {
		return
	}
	type stepCycle struct {
		AtMs     int64           `json:"atMs"`
		Snapshot json.RawMessage `json:"snapshot"`
	}
	steps := struct {
		Node   string          `json:"node"`
		Policy scenario.Policy `json:"policy"`
		Cycles []stepCycle     `json:"cycles"`
	}{Node: node, Policy: policy.With("kubelet", 1)}
	for _, c := range given {
		steps.Cycles = append(steps.Cycles, stepCycle{AtMs: c.at.Milliseconds(), Snapshot: c.snapshot})
	}
	data, err := json.Marshal(steps)
	if err != nil {
		r.err = err
		return
	}
	nw.n++
	path, err := nw.write(fmt.Sprintf("%02d-agent.steps.json", nw.n), data)
	if err != nil {
		r.err = err
		return
	}
	rerun := fmt.Sprintf("%s %s", stepper, path)
	cmd := exec.Command(stepper, path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var lines []agentLine
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l agentLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			r.check("agent", false, "%s: a line the judge cannot read: %v: %s", rerun, err, sc.Text())
			return
		}
		lines = append(lines, l)
	}
	if runErr != nil {
		exit, ok := runErr.(*exec.ExitError)
		msg := strings.TrimSpace(stderr.String())
		if !ok || exit.ExitCode() != 3 {
			r.check("agent", false, "%s: %v: %s", rerun, runErr, msg)
			return
		}
		// A cycle the stepper cannot lay out: the ones before it are compared.
		reason := "cannot be laid out"
		switch {
		case strings.Contains(msg, "does not list it"):
			reason = "a pod runs that the summary does not list; the agent reads every pod cgroup itself"
		case strings.Contains(msg, "whole number of KiB"):
			reason = "the node's memory capacity is not a whole number of KiB (/proc/meminfo's unit) and the policy states a percentage of it"
		}
		r.compared["agent (not laid out: "+reason+")"] += len(given) - len(lines)
		r.seen["cases the agent could not be given whole ("+reason+")"]++
	}
	if len(lines) > len(given) {
		r.check("agent", false, "%s: %d lines for %d cycles", rerun, len(lines), len(given))
		return
	}
	held := heldInGrace(cfg, node, given)
	for i, l := range lines {
		c := given[i]
		where := fmt.Sprintf("cycle %s at +%v (%s)", c.tag, c.at, rerun)
		var problems []string
		kills := c.res.kills
		switch {
		case len(kills) == 0 && len(l.Evict) == 0:
		case len(kills) == 0:
			problems = append(problems, fmt.Sprintf("the kubelet kills nothing; the agent orders %s (%s: %q)", l.Evict[0].Pod, l.Evict[0].Signal, l.Evict[0].Message))
		case len(l.Evict) == 0:
			problems = append(problems, fmt.Sprintf("the kubelet kills %s (%q); the agent orders nothing", scenario.PodKey(kills[0].pod), kills[0].status.Message))
		default:
			kl, e := kills[0], l.Evict[0]
			if len(l.Evict) > 1 {
				problems = append(problems, fmt.Sprintf("the agent orders %d pods at once with evictionMaxPodsPerCycle 1", len(l.Evict)))
			}
			if e.Pod != scenario.PodKey(kl.pod) {
				problems = append(problems, fmt.Sprintf("pod: kubelet %s, agent %s", scenario.PodKey(kl.pod), e.Pod))
			}
			wantKind, want := "hard", int64(0)
			if c.soft {
				wantKind, want = "soft", kl.grace
			}
			if e.Kind != wantKind {
				problems = append(problems, fmt.Sprintf("the agent acts on a %s threshold (%s) in the %s phase", e.Kind, e.Signal, wantKind))
			}
			if e.GracePeriodSeconds != want {
				problems = append(problems, fmt.Sprintf("grace period: kubelet %d s (the agent's expected %d), agent %d", kl.grace, want, e.GracePeriodSeconds))
			}
			if e.Message != kl.status.Message {
				problems = append(problems, fmt.Sprintf("message:\n      kubelet %q\n      agent   %q", kl.status.Message, e.Message))
			}
		}
		kubeletMemory := false
		for _, cond := range c.res.conditions {
			if cond == v1.NodeMemoryPressure {
				kubeletMemory = true
			}
		}
		agentMemory := false
		for _, cond := range l.Conditions {
			if cond == string(v1.NodeMemoryPressure) {
				agentMemory = true
			}
		}
		if kubeletMemory != agentMemory {
			problems = append(problems, fmt.Sprintf("MemoryPressure after the cycle: kubelet %v, agent %v (kubelet %v, agent %v)", kubeletMemory, agentMemory, c.res.conditions, l.Conditions))
		}
		if len(l.Evict) > 0 {
			r.seen["agent orders (the kubelet's kills, compared)"]++
		}
		if len(problems) > 0 && held >= 0 && held <= i {
			// Documented (docs/upstream.md): from here on the agent's state is not the
			// kubelet's, in the way the difference says.
			r.check("agent", true, "")
			r.seen["cases where the agent differs as documented (a soft threshold held to its minimum reclaim during its grace period)"]++
			r.compared["agent (not compared: after the documented minimum-reclaim difference)"] += len(lines) - i - 1
			return
		}
		if !r.check("agent", len(problems) == 0, "%s: %s", where, strings.Join(problems, "; ")) {
			// The agent's state now differs from the kubelet's: later cycles would repeat it.
			r.compared["agent (not compared: after a disagreement)"] += len(lines) - i - 1
			return
		}
	}
}

// stepperPath resolves --agent-stepper.
func stepperPath(p string) string {
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// summaryOf reads a cycle's summary of `node` from its snapshot.
func summaryOf(snapshot []byte, node string) *statsapi.Summary {
	var snap struct {
		Stats map[string]*statsapi.Summary `json:"stats"`
	}
	if err := json.Unmarshal(snapshot, &snap); err != nil {
		return nil
	}
	return snap.Stats[node]
}

// heldInGrace returns the first cycle at which the documented difference of the minimum
// reclaim applies (docs/upstream.md), or -1: a soft memory threshold with a minimum reclaim,
// met in the previous cycle without having acted yet (its grace period running), now
// between its value and value + minimum reclaim. The agent holds it met there (and its
// grace period runs on from its first observation); the kubelet holds only thresholds that
// acted (synchronize: m.thresholdsMet is the set past its grace period), so for it the
// threshold is no longer met and its grace period starts again when it next is.
func heldInGrace(cfg eviction.Config, node string, cycles []agentCycle) int {
	first := -1
	for _, t := range cfg.Thresholds {
		if t.GracePeriod == 0 || !scenario.IsMemorySignal(t.Signal) || t.MinReclaim == nil {
			continue
		}
		metBefore, actedBefore := false, false
		var since time.Duration
		for i, c := range cycles {
			s := summaryOf(c.snapshot, node)
			if s == nil {
				break
			}
			o, ok := scenario.Observe(s)[t.Signal]
			if !ok {
				metBefore, actedBefore = false, false
				continue
			}
			value := scenario.ThresholdQuantity(t.Value, o.Capacity)
			reclaim := scenario.ThresholdQuantity(*t.MinReclaim, o.Capacity)
			below := o.Available < value
			met := below || (metBefore && o.Available < value+reclaim)
			if met && !below && !actedBefore && (first < 0 || i < first) {
				first = i
			}
			if met && !metBefore {
				since = c.at
			}
			metBefore = met
			actedBefore = met && c.at-since >= t.GracePeriod
		}
	}
	return first
}
