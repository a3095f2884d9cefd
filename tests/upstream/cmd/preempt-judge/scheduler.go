package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"nodewarden.test/upstream/internal/scenario"
)

// outcome is what the real scheduler did with the preemptor.
type outcome struct {
	// Kind: "bound" (it fit: bound with no victims), "preempted" (nominated to Node, Victims
	// deleted), "unschedulable" (no room, no nomination).
	Kind      string
	Node      string
	Nominated string
	Victims   []string // pod keys, sorted
	Message   string   // the PodScheduled condition's message when unschedulable
}

// scenarioRun is one scenario on the shared control plane.
type scenarioRun struct {
	cs *kubernetes.Clientset
	c  *scenario.PreemptionCase
	// Snapshot is the §2 snapshot read back from the API server just before the preemptor
	// was submitted; Preemptor is the preemptor as the API server stored it.
	Snapshot  []byte
	Preemptor *v1.Pod
	nodes     []v1.Node
	pods      []v1.Pod
}

// How long a scenario waits on the control plane (nodes ready, budgets computed, a
// nomination kept, the scheduler's decision) before it is an error. On a quiet machine each
// wait ends in seconds; the bound is for a starved one (2 cores with builds beside the run
// and 32 scenarios at once kept some waits past 90 s), where a slow controller is no
// disagreement and must not fail the run.
const patience = 5 * time.Minute

// bounded polling: every `every` until `check` says done or `limit` has passed.
func poll(ctx context.Context, what string, every, limit time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		done, err := check()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// setUp creates the scenario's objects and waits until the cluster has settled: the nodes
// without the not-ready taint, every pod running and ready, the terminating pods
// terminating, every disruption budget's status computed over the pods it selects.
func (r *scenarioRun) setUp(ctx context.Context) error {
	cs, c := r.cs, r.c
	for _, ns := range c.Namespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	// The ServiceAccount admission plugin refuses a pod until the controller manager has
	// made its namespace's default ServiceAccount ("error looking up service account"): a
	// second on a quiet machine, much longer on a starved one.
	for _, ns := range c.Namespaces {
		if err := poll(ctx, "the default ServiceAccount of "+ns, 200*time.Millisecond, patience, func() (bool, error) {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		}); err != nil {
			return err
		}
	}
	for i := range c.PriorityClasses {
		pc := c.PriorityClasses[i].DeepCopy()
		pc.ResourceVersion = ""
		if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("priority class %s: %w", pc.Name, err)
		}
	}
	for i := range c.RuntimeClasses {
		rc := c.RuntimeClasses[i].DeepCopy()
		if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("runtime class %s: %w", rc.Name, err)
		}
	}
	now := metav1.Now()
	for i := range c.Nodes {
		node := c.Nodes[i].DeepCopy()
		node.CreationTimestamp = metav1.Time{}
		for k := range node.Status.Conditions {
			node.Status.Conditions[k].LastHeartbeatTime = now
			node.Status.Conditions[k].LastTransitionTime = now
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
	}
	for i := range c.Pods {
		pod := c.Pods[i].DeepCopy()
		pod.CreationTimestamp = metav1.Time{}
		status := pod.Status
		created, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		qos := created.Status.QOSClass
		created.Status = status
		created.Status.QOSClass = qos
		if _, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	// The nominated pods: created pending, then given their nomination as the scheduler
	// writes it (a status update, retried over the scheduler's own updates of the pod).
	for i := range c.Nominated {
		pod := c.Nominated[i].DeepCopy()
		node := pod.Status.NominatedNodeName
		pod.Status = v1.PodStatus{}
		if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("nominated pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if err := poll(ctx, "nominating "+pod.Name, 100*time.Millisecond, patience, func() (bool, error) {
			p, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			p.Status.NominatedNodeName = node
			_, err = cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				return false, nil
			}
			return err == nil, err
		}); err != nil {
			return err
		}
	}
	for _, key := range c.Terminating {
		ns, name := scenario.SplitKey(key)
		grace := int64(3600)
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			return fmt.Errorf("deleting pod %s: %w", key, err)
		}
	}
	for i := range c.PodDisruptionBudgets {
		pdb := c.PodDisruptionBudgets[i].DeepCopy()
		pdb.CreationTimestamp = metav1.Time{}
		if _, err := cs.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("pdb %s/%s: %w", pdb.Namespace, pdb.Name, err)
		}
	}
	// The not-ready taint of TaintNodesByCondition goes once the node-lifecycle controller
	// has seen the Ready condition.
	selector := scenario.ScenarioLabel + "=" + c.Prefix
	if err := poll(ctx, "nodes ready", 200*time.Millisecond, patience, func() (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		if len(nodes.Items) != len(c.Nodes) {
			return false, nil
		}
		for _, n := range nodes.Items {
			for _, t := range n.Spec.Taints {
				if t.Key == v1.TaintNodeNotReady || t.Key == v1.TaintNodeUnreachable {
					return false, nil
				}
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	// Every budget's status counts what it selects: the disruption controller has seen the
	// pods running and ready (and the terminating ones terminating).
	if err := poll(ctx, "disruption budgets computed", 200*time.Millisecond, patience, func() (bool, error) {
		pods, err := r.listPods(ctx)
		if err != nil {
			return false, err
		}
		for _, ns := range c.Namespaces {
			pdbs, err := cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, pdb := range pdbs.Items {
				if pdb.Status.ObservedGeneration < pdb.Generation {
					return false, nil
				}
				sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				if err != nil {
					return false, err
				}
				expected, healthy := int32(0), int32(0)
				for _, p := range pods {
					if p.Namespace != pdb.Namespace || !sel.Matches(labels.Set(p.Labels)) {
						continue
					}
					expected++
					if p.DeletionTimestamp == nil {
						healthy++
					}
				}
				if pdb.Status.ExpectedPods != expected || pdb.Status.CurrentHealthy != healthy {
					return false, nil
				}
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	// The scheduler has tried each nominated pod, found no room and kept its nomination
	// (preemptionPolicy Never: no preemption, the nomination stays).
	for i := range c.Nominated {
		want := c.Nominated[i]
		if err := poll(ctx, "nominated pod "+want.Name+" unschedulable", 200*time.Millisecond, patience, func() (bool, error) {
			p, err := cs.CoreV1().Pods(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName != "" || p.Status.NominatedNodeName != want.Status.NominatedNodeName {
				return false, fmt.Errorf("the scheduler bound it to %q, nominated %q", p.Spec.NodeName, p.Status.NominatedNodeName)
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse && cond.Reason == v1.PodReasonUnschedulable {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return err
		}
	}
	// The scheduler's informers see what the controller-manager's saw; give them a moment
	// more (no correctness rests on it: a scheduler that had not seen a pod would show as a
	// disagreement, and the run prints it).
	time.Sleep(time.Second)
	return nil
}

func (r *scenarioRun) listPods(ctx context.Context) ([]v1.Pod, error) {
	var out []v1.Pod
	for _, ns := range r.c.Namespaces {
		pods, err := r.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out = append(out, pods.Items...)
	}
	return out, nil
}

// snapshot reads the scenario back from the API server as a §2 snapshot.
func (r *scenarioRun) snapshot(ctx context.Context) error {
	cs, c := r.cs, r.c
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: scenario.ScenarioLabel + "=" + c.Prefix})
	if err != nil {
		return err
	}
	pods, err := r.listPods(ctx)
	if err != nil {
		return err
	}
	classes, err := cs.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var pdbs []policyv1.PodDisruptionBudget
	for _, ns := range c.Namespaces {
		list, err := cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pdbs = append(pdbs, list.Items...)
	}
	r.nodes, r.pods = nodes.Items, pods
	r.Snapshot, err = json.MarshalIndent(map[string]any{
		"nodes": nodes.Items, "pods": pods, "priorityClasses": classes.Items, "podDisruptionBudgets": pdbs,
	}, "", " ")
	return err
}

// submit creates the preemptor and follows what the scheduler does with it, finishing the
// deletion of each pod it deletes as the kubelet would (a deletion with grace period 0),
// until the preemptor is bound, or marked unschedulable with no nomination.
func (r *scenarioRun) submit(ctx context.Context) (*outcome, error) {
	cs, c := r.cs, r.c
	pod := c.Preemptor.DeepCopy()
	pod.CreationTimestamp = metav1.Time{}
	created, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("preemptor: %w", err)
	}
	r.Preemptor = created
	before := map[string]bool{}
	for _, p := range r.pods {
		if p.DeletionTimestamp != nil {
			before[scenario.PodKey(&p)] = true
		}
	}
	victims := map[string]bool{}
	out := &outcome{}
	zero := int64(0)
	var last *v1.Pod
	err = poll(ctx, "the scheduler's decision on "+scenario.PodKey(created), 100*time.Millisecond, patience, func() (bool, error) {
		pods, err := r.listPods(ctx)
		if err != nil {
			return false, err
		}
		var self *v1.Pod
		for i := range pods {
			p := &pods[i]
			key := scenario.PodKey(p)
			if p.UID == created.UID {
				self = p
				continue
			}
			if p.DeletionTimestamp != nil && !before[key] {
				victims[key] = true
				err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
					GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					return false, err
				}
			}
		}
		for _, p := range r.pods {
			key := scenario.PodKey(&p)
			if before[key] {
				continue
			}
			found := false
			for i := range pods {
				if pods[i].UID == p.UID {
					found = true
				}
			}
			if !found {
				victims[key] = true // deleted at once (no node-side grace)
			}
		}
		if self == nil {
			return false, fmt.Errorf("the preemptor is gone")
		}
		if self.Status.NominatedNodeName != "" {
			out.Nominated = self.Status.NominatedNodeName
		}
		if self.Spec.NodeName != "" {
			out.Node = self.Spec.NodeName
			return true, nil
		}
		for _, cond := range self.Status.Conditions {
			if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse && cond.Reason == v1.PodReasonUnschedulable &&
				out.Nominated == "" && len(victims) == 0 {
				out.Message = cond.Message
				return true, nil
			}
		}
		last = self
		return false, nil
	})
	if err != nil {
		if last != nil {
			state, _ := json.Marshal(last.Status)
			err = fmt.Errorf("%w (victims so far %v; its status %s)", err, victims, state)
		}
		return nil, err
	}
	for key := range victims {
		out.Victims = append(out.Victims, key)
	}
	sort.Strings(out.Victims)
	switch {
	case out.Node == "":
		out.Kind = "unschedulable"
	case len(out.Victims) == 0 && out.Nominated == "":
		out.Kind = "bound"
	default:
		out.Kind = "preempted"
		if out.Nominated == "" {
			out.Nominated = out.Node
		}
	}
	return out, nil
}

// tearDown removes every object of the scenario (pods with grace period 0: no kubelet).
func (r *scenarioRun) tearDown(ctx context.Context) {
	cs, c := r.cs, r.c
	zero := int64(0)
	// The scenario's pods and budgets go; its namespaces stay, empty: the control plane
	// runs without the namespace controller (main.go), whose clean-up of a deleted
	// namespace lists and deletes every resource type the server has, a hundred and more
	// requests a namespace, and made up most of a long run's load.
	for _, ns := range c.Namespaces {
		_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = cs.PolicyV1().PodDisruptionBudgets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	}
	for _, n := range c.Nodes {
		_ = cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	}
	for _, rc := range c.RuntimeClasses {
		_ = cs.NodeV1().RuntimeClasses().Delete(ctx, rc.Name, metav1.DeleteOptions{})
	}
	for _, pc := range c.PriorityClasses {
		_ = cs.SchedulingV1().PriorityClasses().Delete(ctx, pc.Name, metav1.DeleteOptions{})
	}
}
