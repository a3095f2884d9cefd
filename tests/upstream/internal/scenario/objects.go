package scenario

import (
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Epoch is the wall-clock origin of every scenario: objects are created before it, the
// judges' clocks start at it.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	Ki = int64(1) << 10
	Mi = int64(1) << 20
	Gi = int64(1) << 30
)

// Gen builds the objects of one scenario from its Rand. The object builders below are
// shared by every judge: the eviction judge uses one node, the scheduler's judge many.
type Gen struct {
	R    *Rand
	Seed uint64
	uids int
	raw  map[types.UID]*v1.Pod // each created pod as it was written
}

// NewGen starts the generator of `seed`.
func NewGen(seed uint64) *Gen {
	return &Gen{R: NewRand(seed), Seed: seed, raw: map[types.UID]*v1.Pod{}}
}

// UID returns a new pod UID, unique within the scenario and across seeds.
func (g *Gen) UID() types.UID {
	g.uids++
	return types.UID(fmt.Sprintf("%08x-%04x-4000-8000-%012x", uint32(g.Seed), g.uids, g.Seed>>32))
}

// ---------------------------------------------------------------------------------------
// Quantities

// MemoryQuantity writes `bytes` the way people write memory: in Mi or Gi, in decimal M or
// G, or as plain bytes. The API server keeps the canonical form of what it was given.
func (g *Gen) MemoryQuantity(bytes int64) resource.Quantity {
	switch g.R.Weighted(5, 2, 2, 1) {
	case 0:
		return *resource.NewQuantity(roundTo(bytes, Mi), resource.BinarySI)
	case 1:
		return *resource.NewQuantity(roundTo(bytes, 1000*1000), resource.DecimalSI)
	case 2:
		if bytes >= Gi {
			return *resource.NewQuantity(roundTo(bytes, Gi/4), resource.BinarySI)
		}
		return *resource.NewQuantity(roundTo(bytes, 64*Mi), resource.BinarySI)
	default:
		return *resource.NewQuantity(bytes, resource.DecimalSI)
	}
}

// CPUQuantity writes millicores as "250m", "1" or "1500m".
func (g *Gen) CPUQuantity(milli int64) resource.Quantity {
	if g.R.Chance(0.3) {
		milli = roundTo(milli, 1000)
	}
	return *resource.NewMilliQuantity(milli, resource.DecimalSI)
}

func roundTo(v, unit int64) int64 {
	r := (v + unit/2) / unit * unit
	if r == 0 {
		return unit
	}
	return r
}

// ---------------------------------------------------------------------------------------
// Priority classes and PodDisruptionBudgets

// PriorityClasses returns user classes as `kubectl get priorityclasses` lists them: a few
// values (negative ones included, ties possible), at most one global default, some with
// preemptionPolicy Never; and sometimes the two built-in classes, which a real cluster lists.
func (g *Gen) PriorityClasses() []schedulingv1.PriorityClass {
	var out []schedulingv1.PriorityClass
	names := []string{"batch-low", "best-effort", "standard", "important", "critical-apps", "never-preempt"}
	values := []int32{-100, 0, 1000, 100000, 999999999, 5000}
	defaultSet := false
	for i, name := range names {
		if !g.R.Chance(0.7) {
			continue
		}
		value := values[i]
		if g.R.Chance(0.2) {
			value = int32(g.R.Between(-1000, 1000000))
		}
		pc := schedulingv1.PriorityClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(Epoch.Add(-72 * time.Hour))},
			Value:      value,
		}
		policy := v1.PreemptLowerPriority
		if name == "never-preempt" || g.R.Chance(0.1) {
			policy = v1.PreemptNever
		}
		pc.PreemptionPolicy = &policy
		if !defaultSet && g.R.Chance(0.12) {
			pc.GlobalDefault = true
			defaultSet = true
		}
		out = append(out, pc)
	}
	if g.R.Chance(0.5) {
		for _, b := range []struct {
			name  string
			value int32
		}{{SystemClusterCritical, systemCriticalValue}, {SystemNodeCritical, systemCriticalValue + 1000}} {
			policy := v1.PreemptLowerPriority
			out = append(out, schedulingv1.PriorityClass{
				TypeMeta:         metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
				ObjectMeta:       metav1.ObjectMeta{Name: b.name, CreationTimestamp: metav1.NewTime(Epoch.Add(-720 * time.Hour))},
				Value:            b.value,
				PreemptionPolicy: &policy,
			})
		}
	}
	return out
}

// PodDisruptionBudgets returns budgets over the pods' labels whose selectors overlap: by
// app, by tier (matchExpressions), by both, an empty selector (every pod of its
// namespace), with 0 to 2 disruptions allowed.
func (g *Gen) PodDisruptionBudgets(namespaces []string) []policyv1.PodDisruptionBudget {
	var out []policyv1.PodDisruptionBudget
	n := g.R.Intn(4)
	for i := 0; i < n; i++ {
		ns := Pick(g.R, namespaces...)
		sel := &metav1.LabelSelector{}
		switch g.R.Intn(4) {
		case 0:
			sel.MatchLabels = map[string]string{"app": Pick(g.R, appNames...)}
		case 1:
			sel.MatchExpressions = []metav1.LabelSelectorRequirement{{
				Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{Pick(g.R, tiers...), Pick(g.R, tiers...)},
			}}
		case 2:
			sel.MatchLabels = map[string]string{"app": Pick(g.R, appNames...)}
			sel.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}
		case 3:
			// An empty selector selects every pod of the namespace.
		}
		minAvailable := intstr.FromInt32(1)
		out = append(out, policyv1.PodDisruptionBudget{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pdb-%d", i), Namespace: ns, CreationTimestamp: metav1.NewTime(Epoch.Add(-48 * time.Hour))},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sel, MinAvailable: &minAvailable},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: int32(g.R.Intn(3))},
		})
	}
	return out
}

var (
	appNames   = []string{"web", "db", "cache", "etl", "logger"}
	tiers      = []string{"frontend", "backend", "batch"}
	Namespaces = []string{"default", "web", "batch", "kube-system"}
)

// ---------------------------------------------------------------------------------------
// Nodes

// NodeOptions shapes a node.
type NodeOptions struct {
	Name string
	// Taints adds taints (NoSchedule, PreferNoSchedule, NoExecute) with this probability.
	Taints float64
}

// Node returns a Ready node as `kubectl get nodes -o json` prints it: capacity, allocatable
// (capacity less reservations), labels, sometimes taints.
func (g *Gen) Node(o NodeOptions) v1.Node {
	memory := Pick(g.R, 2*Gi, 4*Gi, 8*Gi, 16*Gi, 32*Gi, 64*Gi)
	if g.R.Chance(0.3) {
		memory = g.R.Between(2*Gi, 64*Gi) / Ki * Ki // what /proc/meminfo reports: odd KiB counts
	}
	cpu := Pick(g.R, int64(2000), 4000, 8000, 16000, 64000)
	pods := Pick(g.R, int64(110), 110, 32, 16)
	disk := Pick(g.R, 20*Gi, 50*Gi, 100*Gi, 500*Gi)
	reservedMem := Pick(g.R, int64(0), 256*Mi, 512*Mi, Gi)
	if reservedMem > memory/4 {
		reservedMem = memory / 8 / Mi * Mi
	}
	reservedCPU := Pick(g.R, int64(0), 100, 250, 500)
	capacity := v1.ResourceList{
		v1.ResourceCPU:              *resource.NewMilliQuantity(cpu, resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(memory, resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(disk, resource.BinarySI),
	}
	allocatable := v1.ResourceList{
		v1.ResourceCPU:              *resource.NewMilliQuantity(cpu-reservedCPU, resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(memory-reservedMem, resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(disk-disk/10, resource.BinarySI),
	}
	node := v1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              o.Name,
			UID:               types.UID("node-" + o.Name + "-" + strconv.FormatUint(g.Seed, 16)),
			CreationTimestamp: metav1.NewTime(Epoch.Add(-240 * time.Hour)),
			Labels: map[string]string{
				"kubernetes.io/hostname":      o.Name,
				"kubernetes.io/os":            "linux",
				"topology.kubernetes.io/zone": Pick(g.R, "zone-a", "zone-b"),
				"disktype":                    Pick(g.R, "ssd", "hdd"),
			},
		},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Conditions: []v1.NodeCondition{{
				Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.NewTime(Epoch), LastTransitionTime: metav1.NewTime(Epoch.Add(-240 * time.Hour)),
			}},
		},
	}
	if g.R.Chance(o.Taints) {
		effect := Pick(g.R, v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute)
		node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: "dedicated", Value: Pick(g.R, "gpu", "infra"), Effect: effect})
	}
	return node
}

// ---------------------------------------------------------------------------------------
// Pods

// QOS asks for a QoS class; QOSAny leaves it to chance.
type QOS int

const (
	QOSAny QOS = iota
	QOSBestEffort
	QOSBurstable
	QOSGuaranteed
)

// Critical makes a pod critical in one of the ways Kubernetes knows (pkg/kubelet/types:
// IsCriticalPod): a static pod, a mirror pod, or a system priority class.
type Critical int

const (
	NotCritical Critical = iota
	StaticPod
	MirrorPod
	ClusterCriticalClass
	NodeCriticalClass
)

// PodOptions shapes a pod; the zero value draws everything at random.
type PodOptions struct {
	Name, Namespace string
	NodeName        string
	QOS             QOS
	Critical        Critical
	// Classes are the user classes the pod may name (none: no priorityClassName).
	Classes []schedulingv1.PriorityClass
	// NodeMemory scales the memory requests (a pod asks for 1/64 to 1/4 of it).
	NodeMemory int64
	// PodLevel states resources at pod level (spec.resources) with this probability.
	PodLevel float64
	// Tolerations adds tolerations with this probability.
	Tolerations float64
	// NodeSelector adds a nodeSelector with this probability: the labels of NodeLabels (which
	// it then matches) or, half the time, a value no node has.
	NodeSelector float64
	NodeLabels   map[string]string
}

// RawPod returns a pod as a user writes it (before the API server's defaults).
func (g *Gen) RawPod(o PodOptions) *v1.Pod {
	pod := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: o.Name, Namespace: o.Namespace, UID: g.UID(),
			CreationTimestamp: metav1.NewTime(Epoch.Add(-time.Duration(g.R.Between(60, 86400)) * time.Second)),
			Labels:            map[string]string{"app": Pick(g.R, appNames...)},
		},
		Spec: v1.PodSpec{NodeName: o.NodeName},
	}
	if g.R.Chance(0.6) {
		pod.Labels["tier"] = Pick(g.R, tiers...)
	}
	switch o.Critical {
	case StaticPod:
		pod.Annotations = map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.seen": Epoch.Format(time.RFC3339)}
	case MirrorPod:
		pod.Annotations = map[string]string{"kubernetes.io/config.source": "api", "kubernetes.io/config.mirror": fmt.Sprintf("%x", g.R.Between(1, 1<<40)), "kubernetes.io/config.hash": "x"}
	case ClusterCriticalClass:
		pod.Spec.PriorityClassName = SystemClusterCritical
	case NodeCriticalClass:
		pod.Spec.PriorityClassName = SystemNodeCritical
	}
	if pod.Spec.PriorityClassName == "" && len(o.Classes) > 0 && g.R.Chance(0.75) {
		pod.Spec.PriorityClassName = o.Classes[g.R.Intn(len(o.Classes))].Name
	}
	if g.R.Chance(0.5) {
		pod.Spec.TerminationGracePeriodSeconds = ptrTo(Pick(g.R, int64(0), 1, 5, 10, 30, 45, 120, 600))
	}
	qosClass := o.QOS
	if qosClass == QOSAny {
		qosClass = QOS(1 + g.R.Weighted(3, 5, 2))
	}
	nodeMemory := o.NodeMemory
	if nodeMemory == 0 {
		nodeMemory = 8 * Gi
	}
	containers := 1 + g.R.Weighted(6, 3, 1)
	for i := 0; i < containers; i++ {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: containerName("c", i), Image: "registry.example/app:1"})
	}
	// Init containers: plain ones and sidecars (restartPolicy: Always), in any order.
	for i, n := 0, g.R.Weighted(6, 3, 1); i < n; i++ {
		c := v1.Container{Name: containerName("init", i), Image: "registry.example/init:1"}
		if g.R.Chance(0.5) {
			c.RestartPolicy = ptrTo(v1.ContainerRestartPolicyAlways)
			c.Name = containerName("sidecar", i)
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	podLevel := qosClass != QOSBestEffort && g.R.Chance(o.PodLevel)
	g.resources(pod, qosClass, nodeMemory, podLevel)
	if g.R.Chance(0.1) {
		// A RuntimeClass's overhead, copied into the pod by its admission plugin.
		pod.Spec.Overhead = v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(Pick(g.R, int64(10), 100, 250), resource.DecimalSI),
			v1.ResourceMemory: g.MemoryQuantity(Pick(g.R, 16*Mi, 64*Mi, 120*Mi)),
		}
	}
	if g.R.Chance(o.Tolerations) {
		pod.Spec.Tolerations = g.tolerations()
	}
	if g.R.Chance(o.NodeSelector) {
		pod.Spec.NodeSelector = map[string]string{}
		for _, key := range []string{"disktype", "topology.kubernetes.io/zone"} {
			if v, ok := o.NodeLabels[key]; ok && g.R.Chance(0.7) {
				pod.Spec.NodeSelector[key] = v
			}
		}
		if len(pod.Spec.NodeSelector) == 0 || g.R.Chance(0.5) {
			pod.Spec.NodeSelector["disktype"] = Pick(g.R, "ssd", "hdd", "nvme")
		}
	}
	return pod
}

func containerName(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

// resources fills requests and limits for the QoS class asked, at container or pod level.
func (g *Gen) resources(pod *v1.Pod, qosClass QOS, nodeMemory int64, podLevel bool) {
	memory := func() int64 { return g.R.Between(nodeMemory/64, nodeMemory/4) }
	cpu := func() int64 { return g.R.Between(50, 2000) }
	storage := func() int64 { return g.R.Between(100*Mi, 4*Gi) }
	each := func(fn func(c *v1.Container, init bool)) {
		for i := range pod.Spec.InitContainers {
			fn(&pod.Spec.InitContainers[i], true)
		}
		for i := range pod.Spec.Containers {
			fn(&pod.Spec.Containers[i], false)
		}
	}
	set := func(list *v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
		if *list == nil {
			*list = v1.ResourceList{}
		}
		(*list)[name] = q
	}
	switch {
	case qosClass == QOSBestEffort:
		// Ephemeral storage alone does not change the class.
		each(func(c *v1.Container, _ bool) {
			if g.R.Chance(0.15) {
				set(&c.Resources.Requests, v1.ResourceEphemeralStorage, g.MemoryQuantity(storage()))
			}
		})
	case podLevel:
		pod.Spec.Resources = &v1.ResourceRequirements{}
		m, c := g.MemoryQuantity(memory()*2), g.CPUQuantity(cpu()*2)
		if qosClass == QOSGuaranteed {
			set(&pod.Spec.Resources.Limits, v1.ResourceMemory, m)
			set(&pod.Spec.Resources.Limits, v1.ResourceCPU, c)
			if g.R.Chance(0.5) {
				set(&pod.Spec.Resources.Requests, v1.ResourceMemory, m)
				set(&pod.Spec.Resources.Requests, v1.ResourceCPU, c)
			}
		} else {
			switch g.R.Intn(4) {
			case 0:
				set(&pod.Spec.Resources.Requests, v1.ResourceMemory, m)
			case 1:
				set(&pod.Spec.Resources.Requests, v1.ResourceCPU, c)
				set(&pod.Spec.Resources.Limits, v1.ResourceMemory, m)
			case 2:
				half := m.DeepCopy()
				half.Set(m.Value() / 2)
				set(&pod.Spec.Resources.Requests, v1.ResourceMemory, half)
				set(&pod.Spec.Resources.Limits, v1.ResourceMemory, m)
			default:
				set(&pod.Spec.Resources.Requests, v1.ResourceCPU, c)
			}
		}
		// Containers may still state their own, within the pod's.
		each(func(ctr *v1.Container, _ bool) {
			if g.R.Chance(0.3) {
				if lim, ok := pod.Spec.Resources.Limits[v1.ResourceMemory]; ok {
					set(&ctr.Resources.Requests, v1.ResourceMemory, *resource.NewQuantity(lim.Value()/8, resource.BinarySI))
				} else if req, ok := pod.Spec.Resources.Requests[v1.ResourceMemory]; ok && g.R.Chance(0.5) {
					set(&ctr.Resources.Requests, v1.ResourceMemory, *resource.NewQuantity(req.Value()/8, resource.BinarySI))
				}
			}
			if g.R.Chance(0.1) {
				set(&ctr.Resources.Requests, v1.ResourceEphemeralStorage, g.MemoryQuantity(storage()))
			}
		})
	case qosClass == QOSGuaranteed:
		each(func(c *v1.Container, _ bool) {
			m, cp := g.MemoryQuantity(memory()), g.CPUQuantity(cpu())
			set(&c.Resources.Limits, v1.ResourceMemory, m)
			set(&c.Resources.Limits, v1.ResourceCPU, cp)
			if g.R.Chance(0.5) {
				set(&c.Resources.Requests, v1.ResourceMemory, m)
				set(&c.Resources.Requests, v1.ResourceCPU, cp)
			}
			if g.R.Chance(0.2) {
				// A request only: an ephemeral-storage limit lets the kubelet evict a pod over it
				// (localStorageEviction), which nodewarden does not do (docs/upstream.md).
				set(&c.Resources.Requests, v1.ResourceEphemeralStorage, g.MemoryQuantity(storage()))
			}
		})
	default: // Burstable: some container asks for something, not all equal to limits.
		any := false
		each(func(c *v1.Container, init bool) {
			if init && g.R.Chance(0.5) {
				return
			}
			switch g.R.Intn(5) {
			case 0: // nothing
			case 1:
				set(&c.Resources.Requests, v1.ResourceMemory, g.MemoryQuantity(memory()))
				any = true
			case 2:
				req := memory()
				set(&c.Resources.Requests, v1.ResourceMemory, g.MemoryQuantity(req))
				set(&c.Resources.Limits, v1.ResourceMemory, g.MemoryQuantity(req*2))
				set(&c.Resources.Requests, v1.ResourceCPU, g.CPUQuantity(cpu()))
				any = true
			case 3:
				// A limit alone: the API server defaults the request to it.
				set(&c.Resources.Limits, v1.ResourceMemory, g.MemoryQuantity(memory()))
				any = true
			default:
				set(&c.Resources.Requests, v1.ResourceCPU, g.CPUQuantity(cpu()))
				any = true
			}
			if g.R.Chance(0.15) {
				set(&c.Resources.Requests, v1.ResourceEphemeralStorage, g.MemoryQuantity(storage()))
			}
		})
		if !any {
			c := &pod.Spec.Containers[0]
			set(&c.Resources.Requests, v1.ResourceMemory, g.MemoryQuantity(memory()))
		}
	}
}

// tolerations draws tolerations, among them the shapes that matter to admission under
// pressure: the memory-pressure taint's (Exists or Equal with an empty value, effect
// NoSchedule or any), a wildcard, and ones for other taints.
func (g *Gen) tolerations() []v1.Toleration {
	var out []v1.Toleration
	for i, n := 0, 1+g.R.Intn(2); i < n; i++ {
		switch g.R.Intn(8) {
		case 0:
			out = append(out, v1.Toleration{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
		case 1:
			out = append(out, v1.Toleration{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists})
		case 2:
			out = append(out, v1.Toleration{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpEqual, Effect: v1.TaintEffectNoSchedule})
		case 3:
			out = append(out, v1.Toleration{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
		case 4:
			out = append(out, v1.Toleration{Operator: v1.TolerationOpExists})
		case 5:
			out = append(out, v1.Toleration{Key: v1.TaintNodeDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
		case 6:
			out = append(out, v1.Toleration{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpEqual, Value: "true", Effect: v1.TaintEffectNoSchedule})
		default:
			out = append(out, v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule})
		}
	}
	return out
}

// ---------------------------------------------------------------------------------------
// Status: what the kubelet reports for a pod it runs

// Resize is the state of an in-place resize (KEP-1287).
type Resize int

const (
	NoResize   Resize = iota
	Deferred          // PodResizePending, reason Deferred: allocated = actual = old
	Infeasible        // PodResizePending, reason Infeasible: allocated = actual = old
	InProgress        // PodResizeInProgress: allocated = new, actual = old
)

// Running gives a created pod the status its kubelet reports: phase Running, start time,
// container statuses with allocatedResources and resources, and, for a resize, the spec
// moved on (the desired resources) while the status keeps the old ones.
func (g *Gen) Running(pod *v1.Pod, resize Resize, reportAllocation bool) {
	start := metav1.NewTime(pod.CreationTimestamp.Add(time.Duration(g.R.Between(1, 30)) * time.Second))
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = &start
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	old := pod.DeepCopy()
	if resize != NoResize && pod.Status.QOSClass != v1.PodQOSBestEffort {
		g.resizeSpec(pod)
	} else {
		resize = NoResize
	}
	status := func(c v1.Container, oldC v1.Container) v1.ContainerStatus {
		cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: ptrTo(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: start}}}
		if reportAllocation {
			allocated := oldC.Resources
			if resize == InProgress {
				allocated = c.Resources
			}
			cs.AllocatedResources = allocated.Requests.DeepCopy()
			actual := oldC.Resources.DeepCopy()
			cs.Resources = actual
		}
		return cs
	}
	for i, c := range pod.Spec.InitContainers {
		cs := status(c, old.Spec.InitContainers[i])
		if c.RestartPolicy == nil {
			cs.Ready, cs.Started = false, ptrTo(false)
			cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
			cs.AllocatedResources, cs.Resources = nil, nil
		}
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, cs)
	}
	for i, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, status(c, old.Spec.Containers[i]))
	}
	if reportAllocation && old.Spec.Resources != nil {
		allocated := old.Spec.Resources
		if resize == InProgress {
			allocated = pod.Spec.Resources
		}
		pod.Status.AllocatedResources = allocated.Requests.DeepCopy()
		pod.Status.Resources = old.Spec.Resources.DeepCopy()
	}
	switch resize {
	case Deferred, Infeasible:
		reason := map[Resize]string{Deferred: v1.PodReasonDeferred, Infeasible: v1.PodReasonInfeasible}[resize]
		pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: reason})
	case InProgress:
		pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue})
	}
}

// resizeSpec changes the cpu and memory of the pod's regular containers (or of its pod-level
// resources) keeping its QoS class: a Guaranteed container keeps requests equal to limits.
func (g *Gen) resizeSpec(pod *v1.Pod) {
	factor := Pick(g.R, 0.5, 0.75, 1.5, 2.0)
	podLevel := pod.Spec.Resources != nil && (len(pod.Spec.Resources.Requests) > 0 || len(pod.Spec.Resources.Limits) > 0)
	if podLevel && factor < 1 {
		// Pod-level requests may not fall below the containers' (ValidatePodResize).
		factor = 1 / factor
	}
	scale := func(list v1.ResourceList, name v1.ResourceName) {
		if q, ok := list[name]; ok {
			if name == v1.ResourceCPU {
				list[name] = *resource.NewMilliQuantity(int64(float64(q.MilliValue())*factor), resource.DecimalSI)
			} else {
				list[name] = *resource.NewQuantity(int64(float64(q.Value())*factor)/Mi*Mi, resource.BinarySI)
			}
		}
	}
	if podLevel {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			scale(pod.Spec.Resources.Requests, name)
			scale(pod.Spec.Resources.Limits, name)
		}
		return
	}
	for i := range pod.Spec.Containers {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			scale(pod.Spec.Containers[i].Resources.Requests, name)
			scale(pod.Spec.Containers[i].Resources.Limits, name)
		}
	}
}

// Nominated makes a created pod one the scheduler has nominated to `node` after preempting
// there: Pending, not bound, status.nominatedNodeName set.
func (g *Gen) Nominated(pod *v1.Pod, node string) {
	pod.Spec.NodeName = ""
	pod.Status.Phase = v1.PodPending
	pod.Status.NominatedNodeName = node
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
}

// Terminating marks a pod deleted: a deletion timestamp and grace period, its containers
// still running.
func (g *Gen) Terminating(pod *v1.Pod) {
	at := metav1.NewTime(Epoch.Add(-time.Duration(g.R.Between(1, 20)) * time.Second))
	pod.DeletionTimestamp = &at
	grace := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	pod.DeletionGracePeriodSeconds = &grace
}
