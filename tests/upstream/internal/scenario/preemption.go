package scenario

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	resourcehelper "k8s.io/component-helpers/resource"
)

// ScenarioLabel is on every node of a preemption scenario, and the scenario's preemptor
// selects it (spec.nodeSelector): scenarios then share one control plane without one
// preemptor looking at another's nodes. It is part of the case, so explain sees it too.
const ScenarioLabel = "nodewarden.test/scenario"

// PreemptionCase is one scenario for the scheduler's judge: objects as a user writes them,
// before the API server's defaults (the judge creates them in a real cluster). The running
// pods are bound (spec.nodeName) and their status is what a kubelet reports of a running,
// ready pod; Terminating names the pods the judge deletes (with a long grace period, so
// they stay terminating: no kubelet finishes them) before it submits the preemptor.
type PreemptionCase struct {
	Seed      uint64 `json:"seed"`
	Generator string `json:"generator"`
	Note      string `json:"note,omitempty"`
	// Prefix names the scenario's namespaces, nodes and priority classes (cluster-scoped).
	Prefix          string                       `json:"prefix"`
	Namespaces      []string                     `json:"namespaces"`
	PriorityClasses []schedulingv1.PriorityClass `json:"priorityClasses,omitempty"`
	// RuntimeClasses carry the overhead of the pods that have one (the API server refuses
	// a pod overhead that its RuntimeClass does not state).
	RuntimeClasses       []nodev1.RuntimeClass          `json:"runtimeClasses,omitempty"`
	Nodes                []v1.Node                      `json:"nodes"`
	Pods                 []v1.Pod                       `json:"pods"`
	Terminating          []string                       `json:"terminating,omitempty"`
	PodDisruptionBudgets []policyv1.PodDisruptionBudget `json:"podDisruptionBudgets,omitempty"`
	// Nominated are pending pods the judge marks nominated (status.nominatedNodeName) to a
	// node of the scenario, in a namespace of their own (Namespaces' last: no budget selects
	// them). Each asks for more than its node has free, may go to that node only and has a
	// class with preemptionPolicy Never, so the scheduler keeps the nomination without acting
	// on it; the scheduler counts it on that node for a preemptor of lower or equal priority.
	Nominated []v1.Pod `json:"nominated,omitempty"`
	Preemptor v1.Pod   `json:"preemptor"`
}

// HasGlobalDefault says whether one of the case's classes is the global default: the judge
// then runs the scenario alone on the control plane (the default applies to every pod
// created while it exists).
func (c *PreemptionCase) HasGlobalDefault() bool {
	for i := range c.PriorityClasses {
		if c.PriorityClasses[i].GlobalDefault {
			return true
		}
	}
	return false
}

// PreemptionGenerator names the version of Preemption.
const PreemptionGenerator = "preemption/5"

// ReadPreemptionCase reads a case written by Marshal.
func ReadPreemptionCase(path string) (*PreemptionCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c PreemptionCase
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// Preemption generates the scenario of `seed`: 1 to 5 nodes of one scenario (capacity,
// allocatable, labels, sometimes a taint, sometimes unschedulable, sometimes an extended
// resource), each filled to 40–110 % of its memory (sometimes to its pod count) by running
// pods of the scenario's priority classes (some with preemptionPolicy Never, values that
// tie, negative ones) or the built-in system classes, start times that sometimes tie, a few
// terminating pods (among those the preemptor cannot preempt: docs/upstream.md),
// PodDisruptionBudgets with overlapping selectors (minAvailable 1 or 2, so the disruption
// controller computes how many disruptions each allows), and a pending preemptor that may
// fit, may need victims, or may find no room, with a node selector and tolerations
// sometimes.
//
// Drawn from a stream of their own (extraStream), so that a seed without them gives the
// scenario it gave before: in about a tenth of the scenarios one of the classes is the
// global default (the judge runs those alone on the control plane), and in about a fifth
// one or two pending pods are nominated to a node (Nominated), and in about an eighth some
// running pods are in an in-place resize (resize).
//
// What the scenario leaves out, and why: static and mirror pods (the API server does not run
// them; the scheduler does not treat them apart).
func Preemption(seed uint64) (*PreemptionCase, error) {
	g := NewGen(seed)
	x := NewGen(seed ^ extraStream)
	keepDefault := x.R.Chance(0.25)
	prefix := fmt.Sprintf("s%d", seed)
	c := &PreemptionCase{Seed: seed, Generator: PreemptionGenerator, Prefix: prefix,
		Namespaces: []string{prefix + "-a", prefix + "-b"}}
	for _, pc := range g.PriorityClasses() {
		if pc.Name == SystemClusterCritical || pc.Name == SystemNodeCritical {
			continue // built in: every cluster has them
		}
		pc.Name = prefix + "-" + pc.Name
		pc.GlobalDefault = pc.GlobalDefault && keepDefault
		c.PriorityClasses = append(c.PriorityClasses, pc)
	}
	nodes := 1 + g.R.Weighted(2, 3, 3, 2, 1)
	for i := 0; i < nodes; i++ {
		node := g.Node(NodeOptions{Name: fmt.Sprintf("%s-node-%d", prefix, i), Taints: 0.2})
		node.UID = ""
		node.Labels[ScenarioLabel] = prefix
		if g.R.Chance(0.05) {
			node.Spec.Unschedulable = true
		}
		c.Nodes = append(c.Nodes, node)
	}
	// Sometimes an extended resource (requests equal to limits, whole units), on some nodes.
	gpus := g.R.Chance(0.2)
	if gpus {
		for i := range c.Nodes {
			if n := Pick(g.R, int64(0), 1, 2, 4); n > 0 {
				q := *resource.NewQuantity(n, resource.DecimalSI)
				c.Nodes[i].Status.Capacity[ExtendedResource] = q
				c.Nodes[i].Status.Allocatable[ExtendedResource] = q
			}
		}
	}
	podClasses := c.PriorityClasses
	startBase := Epoch.Add(-time.Duration(g.R.Between(3600, 86400)) * time.Second)
	n := 0
	for i := range c.Nodes {
		node := &c.Nodes[i]
		memory := node.Status.Allocatable.Memory().Value()
		target := memory * g.R.Between(40, 110) / 100
		var used int64
		for k := 0; k < 8 && used < target; k++ {
			o := PodOptions{Name: fmt.Sprintf("p%d", n), Namespace: Pick(g.R, c.Namespaces...), NodeName: node.Name,
				Classes: podClasses, NodeMemory: memory, PodLevel: 0.1}
			if g.R.Chance(0.05) {
				o.Critical = Pick(g.R, ClusterCriticalClass, NodeCriticalClass)
			}
			raw := g.RawPod(o)
			// A bound pod on a node tainted NoExecute tolerates it (else the taint manager
			// would evict it while the judge watches).
			for _, t := range node.Spec.Taints {
				if t.Effect == v1.TaintEffectNoExecute {
					raw.Spec.Tolerations = append(raw.Spec.Tolerations, v1.Toleration{Key: t.Key, Operator: v1.TolerationOpExists})
				}
			}
			if gpu, ok := node.Status.Allocatable[ExtendedResource]; ok && g.R.Chance(0.4) {
				askExtended(raw, g.R.Between(1, gpu.Value()))
			}
			stored, err := CreatePod(raw, c.PriorityClasses)
			if err != nil {
				continue // a pod the API server would refuse: draw another
			}
			n++
			reqs := resourcehelper.PodRequests(stored, resourcehelper.PodResourcesOptions{})
			used += reqs.Memory().Value()
			start := startBase.Add(time.Duration(g.R.Between(0, 3600)) * time.Second)
			if g.R.Chance(0.15) {
				start = startBase // ties in start time
			}
			raw.UID = ""
			c.runtimeClass(raw)
			raw.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: ptrTo(metav1.NewTime(start)),
				Conditions: []v1.PodCondition{
					{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(start)},
					{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(start)},
				}}
			if g.R.Chance(0.12) {
				c.Terminating = append(c.Terminating, raw.Namespace+"/"+raw.Name)
			}
			c.Pods = append(c.Pods, *raw)
		}
	}
	// Sometimes a node takes no more pods than it runs (or one more): preemption for the
	// pod count.
	for i := range c.Nodes {
		if g.R.Chance(0.15) {
			count := int64(0)
			for k := range c.Pods {
				if c.Pods[k].Spec.NodeName == c.Nodes[i].Name {
					count++
				}
			}
			q := *resource.NewQuantity(count+g.R.Between(0, 1), resource.DecimalSI)
			c.Nodes[i].Status.Capacity[v1.ResourcePods] = q
			c.Nodes[i].Status.Allocatable[v1.ResourcePods] = q
		}
	}
	for _, pdb := range g.PodDisruptionBudgets(c.Namespaces) {
		pdb.Status = policyv1.PodDisruptionBudgetStatus{}
		if g.R.Chance(0.3) {
			two := intstr.FromInt32(2)
			pdb.Spec.MinAvailable = &two
		}
		c.PodDisruptionBudgets = append(c.PodDisruptionBudgets, pdb)
	}

	// The preemptor: sized from a node's free room (fits), a node's total (needs victims) or
	// more than any node has (no room); usually of a high class.
	var classes []schedulingv1.PriorityClass
	for _, pc := range c.PriorityClasses {
		if pc.Value >= 1000 || g.R.Chance(0.3) {
			classes = append(classes, pc)
		}
	}
	if len(classes) == 0 {
		classes = c.PriorityClasses
	}
	scale := Pick(g.R, int64(1), 1, 2, 4)
	ref := c.Nodes[g.R.Intn(len(c.Nodes))]
	for attempt := 0; ; attempt++ {
		o := PodOptions{Name: "preemptor", Namespace: c.Namespaces[0], Classes: classes,
			NodeMemory: ref.Status.Allocatable.Memory().Value() * scale, QOS: Pick(g.R, QOSBurstable, QOSGuaranteed),
			PodLevel: 0.1, Tolerations: 0.3, NodeSelector: 0.2, NodeLabels: ref.Labels}
		if g.R.Chance(0.03) {
			o.Critical = ClusterCriticalClass
		}
		raw := g.RawPod(o)
		if raw.Spec.NodeSelector == nil {
			raw.Spec.NodeSelector = map[string]string{}
		}
		raw.Spec.NodeSelector[ScenarioLabel] = prefix
		if gpus && g.R.Chance(0.5) {
			askExtended(raw, g.R.Between(1, 2))
		}
		stored, err := CreatePod(raw, c.PriorityClasses)
		if err != nil {
			if attempt < 20 {
				continue
			}
			return nil, fmt.Errorf("seed %d: no valid preemptor: %w", seed, err)
		}
		raw.UID = ""
		c.runtimeClass(raw)
		c.Preemptor = *raw
		// A terminating pod the preemptor outranks is, for the scheduler, a victim whose
		// deletion is under way; nodewarden never counts it as a victim (docs/upstream.md):
		// terminating pods are drawn among the pods the preemptor cannot preempt.
		var terminating []string
		for _, key := range c.Terminating {
			for i := range c.Pods {
				p := &c.Pods[i]
				if PodKey(p) != key {
					continue
				}
				if s, err := CreatePod(p, c.PriorityClasses); err == nil && *s.Spec.Priority >= *stored.Spec.Priority {
					terminating = append(terminating, key)
				}
			}
		}
		c.Terminating = terminating
		if x.R.Chance(0.2) {
			c.nominate(x, *stored.Spec.Priority)
		}
		if r := NewGen(seed ^ resizeStream); r.R.Chance(0.15) {
			c.resize(r)
		}
		break
	}
	return c, nil
}

// extraStream names the random stream of what generator preemption/2 added to
// preemption/1 (a global default class, nominated pods).
const extraStream = 0x6e6f6d696e617465 // "nominate"

// resizeStream names the random stream of the in-place resizes (generator preemption/2).
const resizeStream = 0x726573697a65 // "resize"

// resize puts some running pods in an in-place resize state (KEP-1287), as their kubelet
// reports it: the spec holds the desired resources (Gen.resizeSpec: cpu and memory of the
// regular containers, QoS class kept), the container statuses the old ones the kubelet
// still runs with, and a condition says PodResizePending (Deferred or Infeasible) or
// PodResizeInProgress. A pod's init containers report what a v1.37 kubelet reports for
// them (convertToAPIContainerStatuses): allocatedResources their requests, resources their
// resources, a sidecar running and any other init container terminated (Completed).
// A pod with pod-level resources (both cpu and memory requested at the pod level) resizes
// them (Gen.resizeSpec), and its status carries the pod level as a v1.37 kubelet writes it
// (InPlacePodLevelResourcesVerticalScaling, beta and on since 1.36): see below.
// Generator preemption/5 draws both (preemption/3 drew pods with init containers with no
// init-container status, which no kubelet writes; preemption/4 left them out, and neither
// resized pod-level resources).
func (c *PreemptionCase) resize(x *Gen) {
	for i := range c.Pods {
		p := &c.Pods[i]
		if !x.R.Chance(0.35) {
			continue
		}
		stored, err := CreatePod(p, c.PriorityClasses)
		if err != nil || stored.Status.QOSClass == v1.PodQOSBestEffort {
			continue
		}
		podLevel := stored.Spec.Resources != nil && (len(stored.Spec.Resources.Requests) > 0 || len(stored.Spec.Resources.Limits) > 0)
		if podLevel {
			// Only pod-level stanzas that request both cpu and memory (as stored): what a
			// kubelet reads back from the pod's cgroup for a resource the stanza does not
			// request is not modelled here.
			_, cpu := stored.Spec.Resources.Requests[v1.ResourceCPU]
			_, memory := stored.Spec.Resources.Requests[v1.ResourceMemory]
			if !cpu || !memory {
				continue
			}
		}
		old := p.DeepCopy()
		x.resizeSpec(p)
		resized, err := CreatePod(p, c.PriorityClasses)
		if err != nil {
			*p = *old
			continue
		}
		state := Pick(x.R, Deferred, Infeasible, InProgress)
		for k, ctr := range p.Spec.Containers {
			// What the kubelet runs: the old resources as the API server stored them
			// (requests defaulted from limits); what it has allocated: the old requests, or
			// the new ones once the resize is in progress.
			allocated := stored.Spec.Containers[k].Resources.Requests.DeepCopy()
			if state == InProgress {
				allocated = resized.Spec.Containers[k].Resources.Requests.DeepCopy()
			}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{
				Name: ctr.Name, Image: ctr.Image, Ready: true, Started: ptrTo(true),
				State:              v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: *p.Status.StartTime}},
				AllocatedResources: allocated,
				Resources:          stored.Spec.Containers[k].Resources.DeepCopy(),
			})
		}
		if podLevel {
			// The pod level as convertToAPIPodLevelResourcesStatus and the status manager
			// write it: allocatedResources the allocated pod's PodRequests (the pod-level
			// cpu and memory, the containers' figure for anything else, and the overhead);
			// resources the allocated stanza with the cpu request and the limits read back
			// from the pod's cgroup, that is the old ones until the resize is actuated.
			allocatedPod := stored
			if state == InProgress {
				allocatedPod = resized
			}
			p.Status.AllocatedResources = resourcehelper.PodRequests(allocatedPod, resourcehelper.PodResourcesOptions{})
			running := allocatedPod.Spec.Resources.DeepCopy()
			running.Requests[v1.ResourceCPU] = stored.Spec.Resources.Requests[v1.ResourceCPU].DeepCopy()
			running.Limits = stored.Spec.Resources.Limits.DeepCopy()
			p.Status.Resources = running
		}
		for k, ctr := range p.Spec.InitContainers {
			// Init containers are not resized: allocated and running as stored.
			was := stored.Spec.InitContainers[k]
			st := v1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, Ready: true, Started: ptrTo(true),
				State:              v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: *p.Status.StartTime}},
				AllocatedResources: was.Resources.Requests.DeepCopy(),
				Resources:          was.Resources.DeepCopy(),
			}
			if ctr.RestartPolicy == nil {
				st.Ready, st.Started = false, ptrTo(false)
				st.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
					StartedAt: *p.Status.StartTime, FinishedAt: *p.Status.StartTime}}
			}
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, st)
		}
		switch state {
		case Deferred:
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred})
		case Infeasible:
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonInfeasible})
		default:
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue})
		}
	}
}

// nominate adds one or two nominated pods (PreemptionCase.Nominated), each with a class of
// its own whose value is the preemptor's (`priority`), just below, above, or anything.
func (c *PreemptionCase) nominate(x *Gen, priority int32) {
	ns := c.Prefix + "-n"
	c.Namespaces = append(c.Namespaces, ns)
	count := 1 + x.R.Intn(2)
	for k := 0; k < count; k++ {
		node := &c.Nodes[x.R.Intn(len(c.Nodes))]
		var value int64
		switch x.R.Intn(4) {
		case 0:
			value = int64(priority)
		case 1:
			value = int64(priority) - 1
		case 2:
			value = int64(priority) + x.R.Between(1, 1000)
		default:
			value = x.R.Between(-1000, 1000000)
		}
		value = min(max(value, -1000000), 1000000000)
		never := v1.PreemptNever
		class := schedulingv1.PriorityClass{
			TypeMeta:         metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
			ObjectMeta:       metav1.ObjectMeta{Name: fmt.Sprintf("%s-nominated-%d", c.Prefix, k)},
			Value:            int32(value),
			PreemptionPolicy: &never,
		}
		c.PriorityClasses = append(c.PriorityClasses, class)
		// More memory than the node has free, so it waits there.
		allocatable := node.Status.Allocatable.Memory().Value()
		var used int64
		for i := range c.Pods {
			if c.Pods[i].Spec.NodeName != node.Name {
				continue
			}
			if s, err := CreatePod(&c.Pods[i], c.PriorityClasses); err == nil {
				reqs := resourcehelper.PodRequests(s, resourcehelper.PodResourcesOptions{})
				used += reqs.Memory().Value()
			}
		}
		memory := max(allocatable-used, 0) + x.R.Between(1, max(allocatable/3, 2))
		pod := v1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nominated-%d", k), Namespace: ns},
			Spec: v1.PodSpec{
				PriorityClassName: class.Name,
				Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
						v1.ResourceCPU:    resource.MustParse("10m"),
						v1.ResourceMemory: *resource.NewQuantity(memory, resource.BinarySI)}}}},
				Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
						NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
							Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node.Name}}}}}}}},
			},
		}
		x.Nominated(&pod, node.Name)
		c.Nominated = append(c.Nominated, pod)
	}
}

// runtimeClass gives a pod with an overhead the RuntimeClass that states it.
func (c *PreemptionCase) runtimeClass(pod *v1.Pod) {
	if pod.Spec.Overhead == nil {
		return
	}
	name := c.Prefix + "-rc-" + pod.Name
	c.RuntimeClasses = append(c.RuntimeClasses, nodev1.RuntimeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "node.k8s.io/v1", Kind: "RuntimeClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Handler:    "runc",
		Overhead:   &nodev1.Overhead{PodFixed: pod.Spec.Overhead.DeepCopy()},
	})
	pod.Spec.RuntimeClassName = &name
}

// ExtendedResource is the extended resource of the scenarios that have one.
const ExtendedResource v1.ResourceName = "example.com/gpu"

// askExtended makes the pod's first container request (and limit) n units of it.
func askExtended(pod *v1.Pod, n int64) {
	r := &pod.Spec.Containers[0].Resources
	if r.Requests == nil {
		r.Requests = v1.ResourceList{}
	}
	if r.Limits == nil {
		r.Limits = v1.ResourceList{}
	}
	q := *resource.NewQuantity(n, resource.DecimalSI)
	r.Requests[ExtendedResource], r.Limits[ExtendedResource] = q, q
}
