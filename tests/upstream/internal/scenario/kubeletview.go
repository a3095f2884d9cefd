package scenario

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	v1resource "k8s.io/kubernetes/pkg/api/v1/resource"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
)

// What the kubelet of a case's node is given: its active pods, in their allocated state, and
// its eviction configuration.

// OnNode is true for a pod the kubelet runs: bound to the node and not terminal.
func OnNode(pod *v1.Pod, node string) bool {
	return pod.Spec.NodeName == node && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

// KubeletActive is true for a pod the judge hands to the eviction manager as active. A
// terminating pod (deletionTimestamp set) is one the kubelet would still rank
// (pkg/kubelet/kubelet_pods.go: filterOutInactivePods keeps a pod whose termination is
// requested) but that nodewarden never ranks or evicts again (docs/reference.md §2.4):
// the judge leaves it out, the documented difference.
func KubeletActive(pod *v1.Pod, node string) bool {
	return OnNode(pod, node) && pod.DeletionTimestamp == nil
}

// AllocatedPod is the pod as the eviction manager sees it: the kubelet hands it
// getAllocatedPods() (pkg/kubelet/kubelet_pods.go), the active pods updated to their
// allocated resources (allocation.updatePodFromAllocation). The allocation is what the pod
// status reports: each container's allocatedResources (its requests; limits stay the
// spec's), and status.allocatedResources for the pod level. Where the status reports none,
// the allocation is the spec.
func AllocatedPod(pod *v1.Pod) *v1.Pod {
	out := pod.DeepCopy()
	byName := map[string]v1.ResourceList{}
	for _, cs := range append(append([]v1.ContainerStatus{}, pod.Status.ContainerStatuses...), pod.Status.InitContainerStatuses...) {
		if cs.AllocatedResources != nil {
			byName[cs.Name] = cs.AllocatedResources
		}
	}
	apply := func(cs []v1.Container) {
		for i := range cs {
			if alloc, ok := byName[cs[i].Name]; ok {
				cs[i].Resources.Requests = alloc.DeepCopy()
			}
		}
	}
	apply(out.Spec.Containers)
	apply(out.Spec.InitContainers)
	if pod.Status.AllocatedResources != nil && out.Spec.Resources != nil {
		out.Spec.Resources.Requests = pod.Status.AllocatedResources.DeepCopy()
	}
	return out
}

// EvictionRequest is the request eviction ranks a pod by: upstream's
// GetResourceRequestQuantity on the allocated pod, in bytes (or units).
func EvictionRequest(pod *v1.Pod, name v1.ResourceName) int64 {
	q := v1resource.GetResourceRequestQuantity(AllocatedPod(pod), name)
	return q.Value()
}

// DefaultThresholds are nodewarden's defaults when a policy sets no threshold
// (docs/reference.md §4.3): the kubelet's Linux defaults as the contract lists them.
// Kubernetes v1.37's DefaultEvictionHard (pkg/kubelet/eviction/defaults_linux.go) also has
// imagefs.inodesFree<5%; see docs/upstream.md.
var DefaultThresholds = map[string]string{
	"memory.available":  "100Mi",
	"nodefs.available":  "10%",
	"nodefs.inodesFree": "5%",
	"imagefs.available": "15%",
}

// KubeletConfig is the eviction manager's configuration that means what `p` means to
// nodewarden, through the kubelet's own parser (eviction.ParseThresholdConfig):
//   - thresholds: evictionHard as written; when the policy sets neither evictionHard nor
//     evictionSoft, nodewarden's defaults (DefaultThresholds); when it sets evictionSoft
//     alone, no hard threshold (a kubelet configured with evictionHard: {}).
//   - no allocatableMemory.available copied from memory.available: nodewarden reads the
//     policy as written (a kubelet with enforceNodeAllocatable: [] does the same).
//   - the transition period and the maximum grace period as written (defaults 5m and 0).
func KubeletConfig(p Policy) (eviction.Config, error) {
	hard := p.EvictionHard
	if hard == nil && p.EvictionSoft == nil {
		hard = DefaultThresholds
	}
	thresholds, err := eviction.ParseThresholdConfig(nil, hard, p.EvictionSoft, p.EvictionSoftGracePeriod, p.EvictionMinimumReclaim)
	if err != nil {
		return eviction.Config{}, fmt.Errorf("the kubelet refuses the policy: %w", err)
	}
	cfg := eviction.Config{Thresholds: thresholds, PressureTransitionPeriod: 5 * time.Minute}
	if p.EvictionPressureTransitionPeriod != "" {
		d, err := time.ParseDuration(p.EvictionPressureTransitionPeriod)
		if err != nil {
			return eviction.Config{}, err
		}
		cfg.PressureTransitionPeriod = d
	}
	if p.EvictionMaxPodGracePeriod != nil {
		cfg.MaxPodGracePeriodSeconds = *p.EvictionMaxPodGracePeriod
	}
	return cfg, nil
}

// Observation is one eviction signal as the kubelet observes it (makeSignalObservations).
type Observation struct {
	Available, Capacity int64
}

// Observe returns the signals of a summary, as makeSignalObservations computes them.
func Observe(s *statsapi.Summary) map[evictionapi.Signal]Observation {
	out := map[evictionapi.Signal]Observation{}
	u := func(p *uint64) int64 { return int64(*p) }
	if m := s.Node.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		out[evictionapi.SignalMemoryAvailable] = Observation{u(m.AvailableBytes), u(m.AvailableBytes) + u(m.WorkingSetBytes)}
	}
	for _, c := range s.Node.SystemContainers {
		if c.Name == statsapi.SystemContainerPods && c.Memory != nil && c.Memory.AvailableBytes != nil && c.Memory.WorkingSetBytes != nil {
			out[evictionapi.SignalAllocatableMemoryAvailable] = Observation{u(c.Memory.AvailableBytes), u(c.Memory.AvailableBytes) + u(c.Memory.WorkingSetBytes)}
		}
	}
	fs := func(f *statsapi.FsStats, bytes, inodes evictionapi.Signal) {
		if f == nil {
			return
		}
		if f.AvailableBytes != nil && f.CapacityBytes != nil {
			out[bytes] = Observation{u(f.AvailableBytes), u(f.CapacityBytes)}
		}
		if f.InodesFree != nil && f.Inodes != nil {
			out[inodes] = Observation{u(f.InodesFree), u(f.Inodes)}
		}
	}
	fs(s.Node.Fs, evictionapi.SignalNodeFsAvailable, evictionapi.SignalNodeFsInodesFree)
	if s.Node.Runtime != nil {
		fs(s.Node.Runtime.ImageFs, evictionapi.SignalImageFsAvailable, evictionapi.SignalImageFsInodesFree)
	}
	if r := s.Node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		out[evictionapi.SignalPIDAvailable] = Observation{*r.MaxPID - *r.NumOfRunningProcesses, *r.MaxPID}
	}
	return out
}

// ThresholdQuantity resolves a threshold against a capacity (evictionapi.GetThresholdQuantity).
func ThresholdQuantity(v evictionapi.ThresholdValue, capacity int64) int64 {
	return evictionapi.GetThresholdQuantity(v, resource.NewQuantity(capacity, resource.DecimalSI)).Value()
}

// Met is true when the threshold is met against the summary, min reclaim aside
// (thresholdsMet with enforceMinReclaim false), and false when its signal is not observed.
func Met(t evictionapi.Threshold, obs map[evictionapi.Signal]Observation) bool {
	o, ok := obs[t.Signal]
	return ok && ThresholdQuantity(t.Value, o.Capacity) > o.Available
}

// IsMemorySignal is true for the signals the kubelet acts on first (byEvictionPriority).
func IsMemorySignal(s evictionapi.Signal) bool {
	return s == evictionapi.SignalMemoryAvailable || s == evictionapi.SignalAllocatableMemoryAvailable
}

// DiskUsage is a pod's usage of a disk signal's filesystem (bytes, or inodes for the
// inodesFree signals) as the kubelet's podDiskUsage measures it for the rank function
// buildSignalToRankFunc gives that signal: on one filesystem the containers' writable layers
// and logs and the pod's local volumes (localVolumeNames: hostPath, and
// volumeutils.IsLocalEphemeralVolume); with a dedicated image filesystem, the logs and local
// volumes for nodefs.*, the writable layers for imagefs.*.
func DiskUsage(pod *v1.Pod, ps *statsapi.PodStats, signal evictionapi.Signal, dedicated bool) int64 {
	inodes := signal == evictionapi.SignalNodeFsInodesFree || signal == evictionapi.SignalImageFsInodesFree
	image := signal == evictionapi.SignalImageFsAvailable || signal == evictionapi.SignalImageFsInodesFree
	rootfs, logs, volumes := true, true, true
	if dedicated {
		rootfs, logs, volumes = image, !image, !image
	}
	var sum int64
	add := func(fs *statsapi.FsStats) {
		if fs == nil {
			return
		}
		if inodes && fs.InodesUsed != nil {
			sum += int64(*fs.InodesUsed)
		} else if !inodes && fs.UsedBytes != nil {
			sum += int64(*fs.UsedBytes)
		}
	}
	for i := range ps.Containers {
		if rootfs {
			add(ps.Containers[i].Rootfs)
		}
		if logs {
			add(ps.Containers[i].Logs)
		}
	}
	if volumes {
		for _, vol := range pod.Spec.Volumes {
			if vol.HostPath == nil && !volumeutil.IsLocalEphemeralVolume(vol) {
				continue
			}
			for j := range ps.VolumeStats {
				if ps.VolumeStats[j].Name == vol.Name {
					add(&ps.VolumeStats[j].FsStats)
					break
				}
			}
		}
	}
	return sum
}
