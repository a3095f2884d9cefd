package scenario

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// What one eviction does to a case, for the next step's inputs: the pod is Failed with
// reason Evicted (the API keeps it until it is collected), its stats leave the summary, and
// what it used is given back to the node: its working set to memory.available and to the
// pods' cgroup, its processes to pid.available, its disk usage (the summary's
// ephemeral-storage.usedBytes and inodesUsed) to the node filesystem. With a dedicated
// image filesystem, the writable layers (rootfs) are freed there, and only the logs,
// volumes and /etc/hosts on the node filesystem.

// Evict applies the eviction of the pod `key` on `node`, with the message the kubelet wrote.
func (c *Case) Evict(node, key, message string) error {
	ns, name := SplitKey(key)
	found := false
	for i := range c.Pods {
		p := &c.Pods[i]
		if p.Namespace == ns && p.Name == name && p.Spec.NodeName == node {
			p.Status.Phase = v1.PodFailed
			p.Status.Reason = "Evicted"
			p.Status.Message = message
			found = true
		}
	}
	if !found {
		return fmt.Errorf("evicted pod %s is not in the case", key)
	}
	s := c.Stats[node]
	if s == nil {
		return nil
	}
	kept := s.Pods[:0]
	var gone *statsapi.PodStats
	for i := range s.Pods {
		if s.Pods[i].PodRef.Namespace == ns && s.Pods[i].PodRef.Name == name {
			p := s.Pods[i]
			gone = &p
			continue
		}
		kept = append(kept, s.Pods[i])
	}
	s.Pods = kept
	if gone == nil {
		return nil
	}
	give := func(p **uint64, amount uint64, up bool) {
		if *p == nil {
			return
		}
		v := **p
		if up {
			v += amount
		} else if v > amount {
			v -= amount
		} else {
			v = 0
		}
		*p = &v
	}
	if gone.Memory != nil && gone.Memory.WorkingSetBytes != nil {
		ws := *gone.Memory.WorkingSetBytes
		if m := s.Node.Memory; m != nil {
			give(&m.AvailableBytes, ws, true)
			give(&m.WorkingSetBytes, ws, false)
		}
		for i := range s.Node.SystemContainers {
			if sc := &s.Node.SystemContainers[i]; sc.Name == statsapi.SystemContainerPods && sc.Memory != nil {
				give(&sc.Memory.AvailableBytes, ws, true)
				give(&sc.Memory.WorkingSetBytes, ws, false)
			}
		}
	}
	if gone.ProcessStats != nil && gone.ProcessStats.ProcessCount != nil && s.Node.Rlimit != nil && s.Node.Rlimit.NumOfRunningProcesses != nil {
		n := *s.Node.Rlimit.NumOfRunningProcesses - int64(*gone.ProcessStats.ProcessCount)
		if n < 0 {
			n = 0
		}
		s.Node.Rlimit.NumOfRunningProcesses = &n
	}
	if gone.EphemeralStorage != nil {
		var bytes, inodes, rootBytes, rootInodes uint64
		if gone.EphemeralStorage.UsedBytes != nil {
			bytes = *gone.EphemeralStorage.UsedBytes
		}
		if gone.EphemeralStorage.InodesUsed != nil {
			inodes = *gone.EphemeralStorage.InodesUsed
		}
		for _, cs := range gone.Containers {
			if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil {
				rootBytes += *cs.Rootfs.UsedBytes
			}
			if cs.Rootfs != nil && cs.Rootfs.InodesUsed != nil {
				rootInodes += *cs.Rootfs.InodesUsed
			}
		}
		free := func(fs *statsapi.FsStats, b, i uint64) {
			if fs == nil {
				return
			}
			give(&fs.AvailableBytes, b, true)
			give(&fs.UsedBytes, b, false)
			give(&fs.InodesFree, i, true)
			give(&fs.InodesUsed, i, false)
		}
		if c.Judge.DedicatedImageFs && s.Node.Runtime != nil && s.Node.Runtime.ImageFs != nil {
			free(s.Node.Fs, bytes-rootBytes, inodes-rootInodes)
			free(s.Node.Runtime.ImageFs, rootBytes, rootInodes)
		} else {
			free(s.Node.Fs, bytes, inodes)
			if s.Node.Runtime != nil && s.Node.Runtime.ImageFs != nil {
				// One filesystem, reported twice.
				img := s.Node.Runtime.ImageFs
				img.AvailableBytes, img.InodesFree = s.Node.Fs.AvailableBytes, s.Node.Fs.InodesFree
			}
		}
	}
	return nil
}

// Stamp dates every figure of the case's summaries `at`: the kubelet acts only on
// observations newer than its last (thresholdsUpdatedStats).
func (c *Case) Stamp(at time.Time) {
	t := metav1.NewTime(at)
	for _, s := range c.Stats {
		if s.Node.Memory != nil {
			s.Node.Memory.Time = t
		}
		for i := range s.Node.SystemContainers {
			if s.Node.SystemContainers[i].Memory != nil {
				s.Node.SystemContainers[i].Memory.Time = t
			}
		}
		if s.Node.Fs != nil {
			s.Node.Fs.Time = t
		}
		if s.Node.Runtime != nil && s.Node.Runtime.ImageFs != nil {
			s.Node.Runtime.ImageFs.Time = t
		}
		if s.Node.Rlimit != nil {
			s.Node.Rlimit.Time = t
		}
		for i := range s.Pods {
			if s.Pods[i].Memory != nil {
				s.Pods[i].Memory.Time = t
			}
		}
	}
}

// KubeletPods are the pods the judge hands the eviction manager for a cycle: the active pods
// of the node (KubeletActive), as the API server stores them (`stored`, from Stored), in
// their allocated state (AllocatedPod), in the order of the case.
func (c *Case) KubeletPods(node string, stored map[types.UID]*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for i := range c.Pods {
		if KubeletActive(&c.Pods[i], node) {
			out = append(out, AllocatedPod(AsStored(&c.Pods[i], stored)))
		}
	}
	return out
}

// PublishConditions writes the node's pressure conditions into its Node object, as the
// kubelet's node status setters publish them (status True for each condition the eviction
// manager reports, False for the others).
func (c *Case) PublishConditions(node string, conditions []v1.NodeConditionType, at time.Time) {
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.Name != node {
			continue
		}
		var kept []v1.NodeCondition
		for _, cond := range n.Status.Conditions {
			switch cond.Type {
			case v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure:
				continue
			}
			kept = append(kept, cond)
		}
		for _, t := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
			status := v1.ConditionFalse
			reason := map[v1.NodeConditionType]string{v1.NodeMemoryPressure: "KubeletHasSufficientMemory",
				v1.NodeDiskPressure: "KubeletHasNoDiskPressure", v1.NodePIDPressure: "KubeletHasSufficientPID"}[t]
			for _, have := range conditions {
				if have == t {
					status = v1.ConditionTrue
					reason = map[v1.NodeConditionType]string{v1.NodeMemoryPressure: "KubeletHasInsufficientMemory",
						v1.NodeDiskPressure: "KubeletHasDiskPressure", v1.NodePIDPressure: "KubeletHasInsufficientPID"}[t]
				}
			}
			kept = append(kept, v1.NodeCondition{Type: t, Status: status, Reason: reason,
				LastHeartbeatTime: metav1.NewTime(at), LastTransitionTime: metav1.NewTime(at)})
		}
		n.Status.Conditions = kept
	}
}
