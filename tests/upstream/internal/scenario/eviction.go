package scenario

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	kubelettypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// EvictionGenerator names the version of Eviction below; bump it when a seed's case changes.
const EvictionGenerator = "eviction/1"

// Signals nodewarden and the kubelet both know (docs/reference.md §4.2).
var Signals = []evictionapi.Signal{
	evictionapi.SignalMemoryAvailable, evictionapi.SignalAllocatableMemoryAvailable,
	evictionapi.SignalNodeFsAvailable, evictionapi.SignalNodeFsInodesFree,
	evictionapi.SignalImageFsAvailable, evictionapi.SignalImageFsInodesFree,
	evictionapi.SignalPIDAvailable,
}

// Eviction generates the eviction case of `seed`: one node under (or near) pressure, the
// pods it runs with their stats, the kubelet stats summary, an eviction policy with hard
// and soft thresholds around the observed values, and pods to admit.
//
// Two shapes are avoided because the kubelet's answer to them is not a function of its
// inputs (the judge relies on this):
//   - two pods the kubelet's ranking cannot order (sort.Sort is not stable): usages differ
//     and so do usage − request, and pods without stats have distinct priorities;
//   - two thresholds of one group acting in the same cycle: the kubelet picks one of several
//     memory thresholds, or of several other thresholds, in map order
//     (thresholdsMetGracePeriod ranges over a map; byEvictionPriority orders memory first
//     and nothing else). Hard thresholds act before soft ones' grace periods end, so per
//     kind (hard, soft) at most one memory and one other threshold are met at the start,
//     and, as evictions only free resources, never more later.
func Eviction(seed uint64) (*Case, error) {
	g := NewGen(seed)
	nodeName := Pick(g.R, "node-1", "worker-a", "ip-10-0-1-17.ec2.internal")
	node := g.Node(NodeOptions{Name: nodeName, Taints: 0.1})
	classes := g.PriorityClasses()
	var userClasses []schedulingv1.PriorityClass
	for _, c := range classes {
		if c.Name != SystemClusterCritical && c.Name != SystemNodeCritical {
			userClasses = append(userClasses, c)
		}
	}
	nodeMemory := node.Status.Capacity.Memory().Value()
	c := &Case{
		Nodes:           []v1.Node{node},
		PriorityClasses: classes,
		Judge:           Judge{Kind: "eviction", Seed: seed, Generator: EvictionGenerator},
	}
	// The pods the node runs.
	n := 1 + g.R.Intn(9)
	for i := 0; i < n; i++ {
		pod, err := g.createPod(PodOptions{
			Name: fmt.Sprintf("%s-%d", Pick(g.R, appNames...), i), Namespace: Pick(g.R, Namespaces...),
			NodeName: nodeName, Classes: userClasses, NodeMemory: nodeMemory, PodLevel: 0.15, Tolerations: 0.1,
			Critical: g.critical(0.1),
		}, classes, true)
		if err != nil {
			return nil, err
		}
		resize := NoResize
		if g.R.Chance(0.15) {
			resize = Resize(1 + g.R.Intn(3))
		}
		g.Running(pod, resize, g.R.Chance(0.8))
		if g.R.Chance(0.07) {
			g.Terminating(pod)
		}
		c.Pods = append(c.Pods, *pod)
	}
	// Pods the node does not run: one that finished, one bound elsewhere.
	if g.R.Chance(0.1) {
		pod, err := g.createPod(PodOptions{Name: fmt.Sprintf("done-%d", n), Namespace: "batch", NodeName: nodeName, Classes: userClasses, NodeMemory: nodeMemory}, classes, false)
		if err != nil {
			return nil, err
		}
		g.Running(pod, NoResize, true)
		pod.Status.Phase = Pick(g.R, v1.PodSucceeded, v1.PodFailed)
		c.Pods = append(c.Pods, *pod)
	}
	if g.R.Chance(0.1) {
		pod, err := g.createPod(PodOptions{Name: fmt.Sprintf("elsewhere-%d", n), Namespace: "default", NodeName: "node-other", Classes: userClasses, NodeMemory: nodeMemory}, classes, false)
		if err != nil {
			return nil, err
		}
		g.Running(pod, NoResize, true)
		c.Pods = append(c.Pods, *pod)
	}
	// Pods nominated to the node (the scheduler preempted for them): not on it yet.
	for i, n := 0, g.R.Weighted(8, 2); i < n; i++ {
		pod, err := g.createPod(PodOptions{Name: fmt.Sprintf("nominated-%d", i), Namespace: Pick(g.R, Namespaces...), Classes: userClasses, NodeMemory: nodeMemory}, classes, false)
		if err != nil {
			return nil, err
		}
		g.Nominated(pod, nodeName)
		c.Pods = append(c.Pods, *pod)
	}
	c.PodDisruptionBudgets = g.PodDisruptionBudgets(Namespaces)
	c.Judge.DedicatedImageFs = g.R.Chance(0.25)
	summary := g.summary(c, &node)
	c.Stats = map[string]*statsapi.Summary{nodeName: summary}
	c.Judge.Policy = g.evictionPolicy(Observe(summary), func(sig evictionapi.Signal) int64 { return reclaimable(c, nodeName, sig) })
	// Pods to admit: each kind the kubelet's eviction admission tells apart.
	for i, n := 0, 3+g.R.Intn(3); i < n; i++ {
		o := PodOptions{
			Name: fmt.Sprintf("incoming-%d", i), Namespace: Pick(g.R, Namespaces...), NodeName: nodeName,
			Classes: userClasses, NodeMemory: nodeMemory, PodLevel: 0.1,
			NodeSelector: 0.2, NodeLabels: node.Labels,
		}
		switch g.R.Intn(6) {
		case 0, 1:
			o.QOS = QOSBestEffort
			o.Tolerations = 0.6
		case 2:
			o.QOS = QOSBurstable
			o.Tolerations = 0.3
		case 3:
			o.QOS = QOSGuaranteed
		case 4:
			o.Critical = g.critical(1)
			o.QOS = Pick(g.R, QOSBestEffort, QOSAny)
		default:
			o.Tolerations = 0.5
		}
		pod, err := g.createPod(o, classes, false)
		if err != nil {
			return nil, err
		}
		pod.Status.Phase = v1.PodPending
		if g.R.Chance(0.15) {
			// A hand-made object: the QoS class is left to be computed.
			pod.Status.QOSClass = ""
		}
		c.Judge.Incoming = append(c.Judge.Incoming, *pod)
	}
	if g.R.Chance(0.15) {
		g.handWrite(c)
	}
	return c, nil
}

func (g *Gen) critical(p float64) Critical {
	if !g.R.Chance(p) {
		return NotCritical
	}
	return Pick(g.R, StaticPod, MirrorPod, ClusterCriticalClass, NodeCriticalClass)
}

// createPod draws pods until the API server accepts one (a few tries), with local volumes
// for some.
func (g *Gen) createPod(o PodOptions, classes []schedulingv1.PriorityClass, volumes bool) (*v1.Pod, error) {
	var last error
	for try := 0; try < 8; try++ {
		raw := g.RawPod(o)
		if volumes {
			g.volumes(raw)
		}
		pod, err := CreatePod(raw, classes)
		if err == nil {
			g.raw[pod.UID] = raw
			return pod, nil
		}
		last = err
	}
	return nil, fmt.Errorf("seed %d: no pod the API server accepts: %w", g.Seed, last)
}

// handWrite turns the case into one written by hand: each pod's spec as its author wrote it
// (before the API server's defaults and the Priority plugin), no status.qosClass. Pods in the
// middle of a resize keep their stored spec (the resize changed it).
func (g *Gen) handWrite(c *Case) {
	c.Judge.HandWritten = true
	write := func(p *v1.Pod) {
		raw, ok := g.raw[p.UID]
		if !ok {
			return
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodResizePending || cond.Type == v1.PodResizeInProgress {
				return
			}
		}
		nodeName := p.Spec.NodeName
		p.Spec = *raw.Spec.DeepCopy()
		p.Spec.NodeName = nodeName
		p.Status.QOSClass = ""
	}
	for i := range c.Pods {
		write(&c.Pods[i])
	}
	for i := range c.Judge.Incoming {
		write(&c.Judge.Incoming[i])
	}
}

// volumes gives a pod local volumes: emptyDir on disk (counted in its disk usage by the
// kubelet's ranking), emptyDir in memory, configMap, hostPath.
func (g *Gen) volumes(pod *v1.Pod) {
	if g.R.Chance(0.35) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	}
	if g.R.Chance(0.1) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
	}
	if g.R.Chance(0.2) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}}})
	}
	if g.R.Chance(0.05) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/lib/app"}}})
	}
}

// ---------------------------------------------------------------------------------------
// Stats

// podUsage is what one pod uses, before it is written as stats.
type podUsage struct {
	pod       *v1.Pod
	noStats   bool // absent from the summary
	noMemory  bool // in the summary without memory figures
	noProcs   bool // in the summary without process figures
	memory    int64
	procs     int64
	rootfs    []int64 // per container in the summary
	logs      []int64
	rootInode []int64
	logInode  []int64
	volumes   map[string][2]int64 // name -> bytes, inodes
	etcHosts  int64
}

// disk is the pod's usage of a filesystem as the kubelet's podDiskUsage measures it
// (rootfs, logs and local volumes, as chosen), in bytes or inodes.
func (u *podUsage) disk(rootfs, logs, volumes, inodes bool) int64 {
	var sum int64
	for i := range u.rootfs {
		switch {
		case rootfs && inodes:
			sum += u.rootInode[i]
		case rootfs:
			sum += u.rootfs[i]
		}
		switch {
		case logs && inodes:
			sum += u.logInode[i]
		case logs:
			sum += u.logs[i]
		}
	}
	if volumes {
		for name, v := range u.volumes {
			if name == "shm" {
				continue // in memory: not a local volume
			}
			if inodes {
				sum += v[1]
			} else {
				sum += v[0]
			}
		}
	}
	return sum
}

// diskRanked is the usage on one filesystem: every figure.
func (u *podUsage) diskRanked(inodes bool) int64 { return u.disk(true, true, true, inodes) }

// summary writes the kubelet's stats summary for the node: pod usages drawn around their
// eviction requests, node figures that add up (the node's working set holds the pods'),
// and usage figures kept apart so that no two pods tie in a kubelet ranking.
func (g *Gen) summary(c *Case, node *v1.Node) *statsapi.Summary {
	now := metav1.NewTime(Epoch)
	nodeName := node.Name
	nodeMemory := node.Status.Capacity.Memory().Value()
	disk := node.Status.Capacity.StorageEphemeral().Value()
	var usages []*podUsage
	for i := range c.Pods {
		pod := &c.Pods[i]
		if !OnNode(pod, nodeName) {
			continue
		}
		u := &podUsage{pod: pod, volumes: map[string][2]int64{}}
		switch g.R.Weighted(92, 4, 2, 2) {
		case 1:
			u.noStats = true
		case 2:
			u.noMemory = true
		case 3:
			u.noProcs = true
		}
		request := EvictionRequest(pod, v1.ResourceMemory)
		if request > 0 {
			switch g.R.Weighted(45, 5, 50) {
			case 0:
				u.memory = int64(float64(request) * (0.1 + 0.85*g.R.Float()))
			case 1:
				u.memory = request
			default:
				u.memory = int64(float64(request) * (1.02 + 2*g.R.Float()))
			}
		} else {
			u.memory = g.R.Between(nodeMemory/200, nodeMemory/6)
		}
		u.procs = g.R.Between(1, 3000)
		for _, ctr := range runningContainers(pod) {
			_ = ctr
			u.rootfs = append(u.rootfs, g.R.Between(4*Ki, disk/60))
			u.logs = append(u.logs, g.R.Between(0, disk/400))
			u.rootInode = append(u.rootInode, g.R.Between(10, 20000))
			u.logInode = append(u.logInode, g.R.Between(1, 20))
		}
		for _, vol := range pod.Spec.Volumes {
			if vol.EmptyDir != nil || vol.ConfigMap != nil {
				bytes := g.R.Between(4*Ki, disk/100)
				if vol.ConfigMap != nil || vol.EmptyDir.Medium == v1.StorageMediumMemory {
					bytes = g.R.Between(4*Ki, 1*Mi)
				}
				u.volumes[vol.Name] = [2]int64{bytes, g.R.Between(1, 5000)}
			}
		}
		u.etcHosts = Pick(g.R, int64(0), 4096)
		usages = append(usages, u)
	}
	g.separate(usages)

	// Node figures.
	var podsMemory, podsDisk, podsInodes, podsProcs int64
	for _, u := range usages {
		podsMemory += u.memory
		podsProcs += u.procs
		podsDisk += u.diskRanked(false) + u.etcHosts
		podsInodes += u.diskRanked(true)
	}
	u64 := func(v int64) *uint64 {
		if v < 0 {
			v = 0
		}
		x := uint64(v)
		return &x
	}
	i64 := func(v int64) *int64 { return &v }
	workingSet := podsMemory + g.R.Between(100*Mi, 1500*Mi)
	available := nodeMemory - workingSet
	if available < 0 {
		available = g.R.Between(0, 64*Mi)
	}
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		NodeName:  nodeName,
		StartTime: metav1.NewTime(Epoch.Add(-240 * time.Hour)),
		Memory:    &statsapi.MemoryStats{Time: now, AvailableBytes: u64(available), WorkingSetBytes: u64(workingSet), UsageBytes: u64(workingSet + g.R.Between(0, 512*Mi))},
	}}
	allocatable := node.Status.Allocatable.Memory().Value()
	podsWorkingSet := podsMemory + g.R.Between(0, 64*Mi)
	podsAvailable := allocatable - podsWorkingSet
	if podsAvailable < 0 {
		podsAvailable = g.R.Between(0, 32*Mi)
	}
	s.Node.SystemContainers = []statsapi.ContainerStats{
		{Name: statsapi.SystemContainerKubelet, StartTime: s.Node.StartTime, Memory: &statsapi.MemoryStats{Time: now, WorkingSetBytes: u64(g.R.Between(50*Mi, 150*Mi))}},
		{Name: statsapi.SystemContainerPods, StartTime: s.Node.StartTime, Memory: &statsapi.MemoryStats{Time: now, AvailableBytes: u64(podsAvailable), WorkingSetBytes: u64(podsWorkingSet)}},
	}
	images := g.R.Between(1*Gi, 8*Gi)
	inodes := disk / (16 * Ki)
	fs := &statsapi.FsStats{Time: now, CapacityBytes: u64(disk), Inodes: u64(inodes)}
	nodeUsed := podsDisk + images + g.R.Between(500*Mi, 3*Gi)
	fs.AvailableBytes, fs.UsedBytes = u64(disk-nodeUsed), u64(nodeUsed)
	inodesUsed := podsInodes + g.R.Between(20000, 200000)
	fs.InodesFree, fs.InodesUsed = u64(inodes-inodesUsed), u64(inodesUsed)
	s.Node.Fs = fs
	if c.Judge.DedicatedImageFs {
		imageDisk := Pick(g.R, 20*Gi, 50*Gi, 100*Gi)
		imageInodes := imageDisk / (32 * Ki)
		used := images + g.R.Between(0, imageDisk/2)
		iused := g.R.Between(1000, imageInodes/2)
		s.Node.Runtime = &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{Time: now,
			CapacityBytes: u64(imageDisk), AvailableBytes: u64(imageDisk - used), UsedBytes: u64(used),
			Inodes: u64(imageInodes), InodesFree: u64(imageInodes - iused), InodesUsed: u64(iused)}}
	} else {
		// One filesystem: the runtime reports the node's.
		same := *fs
		same.UsedBytes = u64(images)
		s.Node.Runtime = &statsapi.RuntimeStats{ImageFs: &same}
	}
	maxPID := Pick(g.R, int64(32768), 65536, 4194304)
	if podsProcs > maxPID/2 {
		maxPID = 4194304
	}
	s.Node.Rlimit = &statsapi.RlimitStats{Time: now, MaxPID: i64(maxPID), NumOfRunningProcesses: i64(podsProcs + g.R.Between(100, 2000))}

	for _, u := range usages {
		if u.noStats {
			continue
		}
		ps := statsapi.PodStats{
			PodRef:    statsapi.PodReference{Name: u.pod.Name, Namespace: u.pod.Namespace, UID: string(u.pod.UID)},
			StartTime: *u.pod.Status.StartTime,
		}
		if !u.noMemory {
			ps.Memory = &statsapi.MemoryStats{Time: now, WorkingSetBytes: u64(u.memory), UsageBytes: u64(u.memory + g.R.Between(0, 64*Mi))}
		}
		if !u.noProcs {
			ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: u64(u.procs)}
		}
		ps.CPU = &statsapi.CPUStats{Time: now, UsageNanoCores: u64(g.R.Between(0, 2e9))}
		containers := runningContainers(u.pod)
		shares := g.split(u.memory, len(containers))
		for i, ctr := range containers {
			cs := statsapi.ContainerStats{Name: ctr.Name, StartTime: *u.pod.Status.StartTime,
				Rootfs: &statsapi.FsStats{Time: now, UsedBytes: u64(u.rootfs[i]), InodesUsed: u64(u.rootInode[i])},
				Logs:   &statsapi.FsStats{Time: now, UsedBytes: u64(u.logs[i]), InodesUsed: u64(u.logInode[i])},
			}
			if !u.noMemory {
				cs.Memory = &statsapi.MemoryStats{Time: now, WorkingSetBytes: u64(shares[i])}
			}
			ps.Containers = append(ps.Containers, cs)
		}
		var volumeBytes, volumeInodes int64
		names := make([]string, 0, len(u.volumes))
		for name := range u.volumes {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			v := u.volumes[name]
			ps.VolumeStats = append(ps.VolumeStats, statsapi.VolumeStats{Name: name, FsStats: statsapi.FsStats{Time: now, UsedBytes: u64(v[0]), InodesUsed: u64(v[1])}})
			volumeBytes += v[0]
			volumeInodes += v[1]
		}
		// calcEphemeralStorage (pkg/kubelet/stats/helper.go): containers, volumes, /etc/hosts.
		used := u.diskRanked(false) + u.etcHosts
		iused := u.diskRanked(true)
		if u.etcHosts > 0 {
			iused++
		}
		ps.EphemeralStorage = &statsapi.FsStats{Time: now, AvailableBytes: fs.AvailableBytes, CapacityBytes: fs.CapacityBytes,
			UsedBytes: u64(used), InodesFree: fs.InodesFree, Inodes: fs.Inodes, InodesUsed: u64(iused)}
		s.Pods = append(s.Pods, ps)
	}
	return s
}

// runningContainers are the containers a running pod has stats for: its regular containers
// and its sidecars.
func runningContainers(pod *v1.Pod) []v1.Container {
	var out []v1.Container
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	return append(out, pod.Spec.Containers...)
}

// split divides a pod's working set among its containers, leaving some to the pod's own
// cgroup (the pause container, page tables).
func (g *Gen) split(total int64, n int) []int64 {
	out := make([]int64, n)
	if n == 0 {
		return out
	}
	weights := make([]float64, n)
	sum := 0.0
	for i := range weights {
		weights[i] = 0.2 + g.R.Float()
		sum += weights[i]
	}
	share := float64(total) * (0.8 + 0.15*g.R.Float())
	for i := range out {
		out[i] = int64(share * weights[i] / sum)
	}
	return out
}

// separate nudges usages apart until no two pods tie in any kubelet ranking: memory usage
// − request, process counts, disk and inode usage − request, and pods without stats (which
// tie with each other) of distinct priorities.
func (g *Gen) separate(usages []*podUsage) {
	priority := func(p *v1.Pod) int32 {
		if p.Spec.Priority == nil {
			return 0
		}
		return *p.Spec.Priority
	}
	noStatsByPriority := map[int32]bool{}
	for _, u := range usages {
		if u.noStats {
			if noStatsByPriority[priority(u.pod)] {
				u.noStats = false
			}
			noStatsByPriority[priority(u.pod)] = true
		}
	}
	for round := 0; round < 100; round++ {
		clash := false
		seen := map[string]bool{}
		key := func(kind string, v int64) bool {
			k := kind + strconv.FormatInt(v, 10)
			if seen[k] {
				return true
			}
			seen[k] = true
			return false
		}
		for _, u := range usages {
			if u.noStats {
				continue // ordered by priority alone, distinct above
			}
			memReq := EvictionRequest(u.pod, v1.ResourceMemory)
			diskReq := EvictionRequest(u.pod, v1.ResourceEphemeralStorage)
			// A pod in the summary without a figure uses 0 of it, as the kubelet counts it.
			memory, procs := u.memory, u.procs
			if u.noMemory {
				memory = 0
			}
			if u.noProcs {
				procs = 0
			}
			if key("m", memory) || key("mr", memory-memReq) {
				if u.noMemory {
					u.noMemory = false
				} else {
					u.memory += g.R.Between(1, 64*Ki)
				}
				clash = true
			}
			if key("p", procs) {
				if u.noProcs {
					u.noProcs = false
				} else {
					u.procs += g.R.Between(1, 50)
				}
				clash = true
			}
			if len(u.rootfs) > 0 {
				// Every measure a disk ranking may use: one filesystem, or nodefs and imagefs
				// apart; bytes and inodes; with and without the request subtracted.
				for m, measure := range [][3]bool{{true, true, true}, {false, true, true}, {true, false, false}} {
					for _, inodes := range []bool{false, true} {
						d := u.disk(measure[0], measure[1], measure[2], inodes)
						k := fmt.Sprintf("d%d%v", m, inodes)
						if key(k, d) || key(k+"r", d-diskReq) {
							u.rootfs[0] += g.R.Between(1, 256*Ki)
							u.logs[0] += g.R.Between(1, 64*Ki)
							u.rootInode[0] += g.R.Between(1, 50)
							u.logInode[0] += g.R.Between(1, 5)
							clash = true
						}
					}
				}
			}
		}
		if !clash {
			return
		}
	}
}

// ---------------------------------------------------------------------------------------
// Policy

// evictionPolicy draws thresholds around the observed values: some met, some not, some
// exactly at the threshold (not met: the comparison is strict), as quantities or
// percentages, with grace periods, minimum reclaims, a transition period and a maximum grace
// period; in the kubelet-compatible ranking with one pod per cycle. See Eviction for the
// shapes it avoids.
func (g *Gen) evictionPolicy(obs map[evictionapi.Signal]Observation, reclaim func(evictionapi.Signal) int64) Policy {
	p := Policy{Ranking: "kubelet", EvictionMaxPodsPerCycle: 1}
	if g.R.Chance(0.3) {
		p.EvictionMaxPodGracePeriod = ptrTo(Pick(g.R, int64(0), 10, 30, 60, 300))
	}
	p.EvictionPressureTransitionPeriod = Pick(g.R, "", "1s", "30s", "1m", "5m", "10m")
	if g.R.Chance(0.06) {
		return p // no threshold at all: nodewarden's defaults
	}
	hardOnly, softOnly := g.R.Chance(0.5), g.R.Chance(0.15)
	if !softOnly {
		p.EvictionHard = map[string]string{}
	}
	// met[kind][group]: a threshold of that kind and group is met already.
	var met [2][2]bool
	for _, sig := range Signals {
		o, observed := obs[sig]
		weight := map[evictionapi.Signal]float64{
			evictionapi.SignalMemoryAvailable: 0.85, evictionapi.SignalAllocatableMemoryAvailable: 0.25,
			evictionapi.SignalNodeFsAvailable: 0.35, evictionapi.SignalNodeFsInodesFree: 0.15,
			evictionapi.SignalImageFsAvailable: 0.2, evictionapi.SignalImageFsInodesFree: 0.1,
			evictionapi.SignalPIDAvailable: 0.3,
		}[sig]
		if !observed || !g.R.Chance(weight) {
			continue
		}
		group := 1
		if IsMemorySignal(sig) {
			group = 0
		}
		var hardValue int64
		for kind := 0; kind < 2; kind++ { // 0 hard, 1 soft
			if (kind == 0 && softOnly) || (kind == 1 && !softOnly && (hardOnly || !g.R.Chance(0.5))) {
				continue
			}
			wantMet := !met[kind][group] && g.R.Chance(0.6)
			text, value, ok := g.thresholdText(sig, o, reclaim(sig), wantMet, kind == 1, hardValue)
			if !ok {
				continue
			}
			isMet := value > o.Available && text != "0%" && text != "100%"
			if isMet && met[kind][group] {
				continue
			}
			met[kind][group] = met[kind][group] || isMet
			if kind == 0 {
				p.EvictionHard[string(sig)] = text
				if isMet || value > 0 {
					hardValue = value
				}
			} else {
				if p.EvictionSoft == nil {
					p.EvictionSoft, p.EvictionSoftGracePeriod = map[string]string{}, map[string]string{}
				}
				p.EvictionSoft[string(sig)] = text
				p.EvictionSoftGracePeriod[string(sig)] = Pick(g.R, "20s", "30s", "1m", "90s", "2m", "5m", "1m30s")
			}
		}
		if (p.EvictionHard[string(sig)] != "" || p.EvictionSoft[string(sig)] != "") && g.R.Chance(0.3) {
			if p.EvictionMinimumReclaim == nil {
				p.EvictionMinimumReclaim = map[string]string{}
			}
			p.EvictionMinimumReclaim[string(sig)] = g.minReclaimText(sig, o)
		}
	}
	if g.R.Chance(0.02) {
		// What the kubelet takes and nodewarden refuses (docs/upstream.md): a soft threshold
		// whose grace period is 0 (a hard one, to the kubelet), a minimum reclaim over 100%, a
		// negative maximum grace period.
		switch {
		case len(p.EvictionSoft) > 0 && g.R.Chance(0.4):
			for sig := range p.EvictionSoft {
				p.EvictionSoftGracePeriod[sig] = "0s"
				break
			}
		case g.R.Chance(0.5):
			if p.EvictionMinimumReclaim == nil {
				p.EvictionMinimumReclaim = map[string]string{}
			}
			p.EvictionMinimumReclaim[string(evictionapi.SignalMemoryAvailable)] = Pick(g.R, "150%", "100.5%")
		default:
			p.EvictionMaxPodGracePeriod = ptrTo(int64(-1))
		}
	}
	return p
}

// reclaimable is what evicting every pod the kubelet may evict would give back to a signal.
func reclaimable(c *Case, node string, sig evictionapi.Signal) int64 {
	stats := map[string]*statsapi.PodStats{}
	for i := range c.Stats[node].Pods {
		stats[c.Stats[node].Pods[i].PodRef.UID] = &c.Stats[node].Pods[i]
	}
	var sum int64
	for i := range c.Pods {
		p := &c.Pods[i]
		ps := stats[string(p.UID)]
		if !KubeletActive(p, node) || kubelettypes.IsCriticalPod(p) || ps == nil {
			continue
		}
		switch {
		case IsMemorySignal(sig):
			if ps.Memory != nil && ps.Memory.WorkingSetBytes != nil {
				sum += int64(*ps.Memory.WorkingSetBytes)
			}
		case sig == evictionapi.SignalPIDAvailable:
			if ps.ProcessStats != nil && ps.ProcessStats.ProcessCount != nil {
				sum += int64(*ps.ProcessStats.ProcessCount)
			}
		default:
			sum += DiskUsage(p, ps, sig, c.Judge.DedicatedImageFs)
		}
	}
	return sum
}

// thresholdText draws a threshold for a signal, met or not as asked (when it can be), as the
// policy writes it, with its value resolved as the kubelet resolves it. A soft threshold is
// drawn above the hard one of its signal, as operators set them.
func (g *Gen) thresholdText(sig evictionapi.Signal, o Observation, reclaimable int64, met, soft bool, hard int64) (string, int64, bool) {
	bytes := sig == evictionapi.SignalMemoryAvailable || sig == evictionapi.SignalAllocatableMemoryAvailable ||
		sig == evictionapi.SignalNodeFsAvailable || sig == evictionapi.SignalImageFsAvailable
	if g.R.Chance(0.03) {
		return Pick(g.R, "0%", "100%"), 0, true // disabled: written, never met
	}
	var target int64
	switch {
	case !met && g.R.Chance(0.08):
		target = o.Available // at the threshold: not met
	case met && g.R.Chance(0.85):
		// A need that evicting some of the pods covers.
		target = o.Available + 1 + int64(float64(reclaimable)*1.3*g.R.Float())
	case met:
		target = o.Available + 1 + int64(float64(o.Available+o.Capacity/50)*g.R.Float())
	default:
		target = int64(float64(o.Available) * (0.3 + 0.69*g.R.Float()))
	}
	if soft && target <= hard {
		target = hard + 1 + int64(float64(hard)*g.R.Float())
	}
	if target <= 0 {
		target = 1
	}
	if target >= o.Capacity {
		target = o.Capacity - 1
	}
	var text string
	switch {
	case g.R.Chance(0.03):
		// Percentages at the edges of float32, which the kubelet parses them into
		// (parsePercentage: strconv.ParseFloat(s, 32)): just over 100%, just over 0%, digits
		// beyond float32's precision.
		text = Pick(g.R, "100.000001%", "100.0000001%", "99.99999999%", "0.0000001%", "0.00000001%",
			"12.3456789012%", "33.33333333333%", "1e1%", "+5%")
	case g.R.Chance(0.3) && o.Capacity > 0:
		pct := float64(target) / float64(o.Capacity) * 100
		text = strconv.FormatFloat(pct, 'f', Pick(g.R, 0, 1, 2, 2, 7), 64) + "%"
		if text == "0%" || text == "100%" || pct <= 0 || pct >= 100 {
			text = strconv.FormatInt(target, 10)
		}
	case bytes:
		text = g.quantityText(target)
	case g.R.Chance(0.3) && target >= 1000:
		text = strconv.FormatInt(target/1000, 10) + "k"
	default:
		text = strconv.FormatInt(target, 10)
	}
	value, err := parseThresholdValue(text)
	if err != nil || (value.Quantity != nil && value.Quantity.Sign() <= 0) {
		return "", 0, false
	}
	return text, ThresholdQuantity(value, o.Capacity), true
}

func (g *Gen) minReclaimText(sig evictionapi.Signal, o Observation) string {
	if g.R.Chance(0.3) {
		return Pick(g.R, "0.5%", "1%", "2%", "5%")
	}
	amount := int64(float64(o.Capacity) * (0.002 + 0.05*g.R.Float()))
	if amount < 1 {
		amount = 1
	}
	switch sig {
	case evictionapi.SignalPIDAvailable, evictionapi.SignalNodeFsInodesFree, evictionapi.SignalImageFsInodesFree:
		return strconv.FormatInt(amount, 10)
	}
	return g.quantityText(amount)
}

// quantityText writes a number of bytes as people write it, canonical or not ("1.5Gi",
// "1536Mi", "0.5G", "500000k", "15e8"): the kubelet prints its canonical form in messages.
func (g *Gen) quantityText(bytes int64) string {
	switch g.R.Intn(8) {
	case 0:
		return strconv.FormatFloat(float64(bytes)/float64(Gi), 'f', 1+g.R.Intn(2), 64) + "Gi"
	case 1:
		return strconv.FormatFloat(float64(bytes)/1e9, 'f', 1+g.R.Intn(3), 64) + "G"
	case 2:
		return strconv.FormatInt(bytes/1000, 10) + "k"
	case 3:
		mantissa := bytes / 100000000
		if mantissa == 0 {
			mantissa = 1
		}
		return strconv.FormatInt(mantissa, 10) + "e8"
	default:
		q := g.MemoryQuantity(bytes)
		return q.String()
	}
}

// parseThresholdValue reads a threshold as the kubelet does (parseThresholdStatement).
func parseThresholdValue(text string) (evictionapi.ThresholdValue, error) {
	if len(text) > 0 && text[len(text)-1] == '%' {
		f, err := strconv.ParseFloat(text[:len(text)-1], 32)
		if err != nil {
			return evictionapi.ThresholdValue{}, err
		}
		return evictionapi.ThresholdValue{Percentage: float32(f) / 100}, nil
	}
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return evictionapi.ThresholdValue{}, err
	}
	return evictionapi.ThresholdValue{Quantity: &q}, nil
}
