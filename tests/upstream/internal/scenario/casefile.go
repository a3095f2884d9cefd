package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Case is one scenario as a file. Its top-level members other than "judge" are a nodewarden
// snapshot (docs/reference.md §2: what kubectl prints, plus the kubelet's stats summary per
// node), so `nodewarden explain … --snapshot CASE` reads it as it is; "judge" holds what
// the judges need besides: the seed, the policy (written beside the case as a policy file
// for explain), the pods to admit.
type Case struct {
	Nodes                []v1.Node                      `json:"nodes"`
	Pods                 []v1.Pod                       `json:"pods"`
	PriorityClasses      []schedulingv1.PriorityClass   `json:"priorityClasses,omitempty"`
	PodDisruptionBudgets []policyv1.PodDisruptionBudget `json:"podDisruptionBudgets,omitempty"`
	Stats                map[string]*statsapi.Summary   `json:"stats,omitempty"`
	Judge                Judge                          `json:"judge"`
}

// Judge is the part of a case that is not a snapshot.
type Judge struct {
	// Kind is "eviction" (the kubelet's eviction manager and its admission handler).
	Kind string `json:"kind"`
	// Seed names the case: Generate(Kind, Seed) gives it back.
	Seed uint64 `json:"seed"`
	// Generator is the version of the generator that wrote the case; a kept case is read
	// from its file, never regenerated.
	Generator string `json:"generator"`
	// Note says what a kept case shows (regression cases under tests/judges/cases/).
	Note string `json:"note,omitempty"`
	// Policy is nodewarden's policy file for the case (field names of KubeletConfiguration).
	Policy Policy `json:"policy"`
	// DedicatedImageFs: the image filesystem is another device than the node filesystem
	// (what cAdvisor tells the kubelet; the stats alone do not say it).
	DedicatedImageFs bool `json:"dedicatedImageFs,omitempty"`
	// Incoming are pods bound to the node, to admit after each step.
	Incoming []v1.Pod `json:"incoming,omitempty"`
	// HandWritten: the pods of the snapshot are as a person writes them (no defaults of the
	// API server, no spec.priority, no status.qosClass); the kubelet is given them as the API
	// server stores them (Stored).
	HandWritten bool `json:"handWritten,omitempty"`
}

// Policy is nodewarden's policy file (docs/reference.md §4.1). A nil map is a key left out;
// an empty one is written as {} (which, for evictionHard, drops the kubelet's defaults).
type Policy struct {
	EvictionHard                     map[string]string
	EvictionSoft                     map[string]string
	EvictionSoftGracePeriod          map[string]string
	EvictionMinimumReclaim           map[string]string
	EvictionMaxPodGracePeriod        *int64
	EvictionPressureTransitionPeriod string
	EvictionMaxPodsPerCycle          int
	Ranking                          string
}

type policyJSON struct {
	EvictionHard                     *map[string]string `json:"evictionHard,omitempty"`
	EvictionSoft                     *map[string]string `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod          *map[string]string `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMinimumReclaim           *map[string]string `json:"evictionMinimumReclaim,omitempty"`
	EvictionMaxPodGracePeriod        *int64             `json:"evictionMaxPodGracePeriod,omitempty"`
	EvictionPressureTransitionPeriod string             `json:"evictionPressureTransitionPeriod,omitempty"`
	EvictionMaxPodsPerCycle          int                `json:"evictionMaxPodsPerCycle,omitempty"`
	Ranking                          string             `json:"ranking,omitempty"`
}

func mapPtr(m map[string]string) *map[string]string {
	if m == nil {
		return nil
	}
	return &m
}

func (p Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(policyJSON{mapPtr(p.EvictionHard), mapPtr(p.EvictionSoft), mapPtr(p.EvictionSoftGracePeriod),
		mapPtr(p.EvictionMinimumReclaim), p.EvictionMaxPodGracePeriod, p.EvictionPressureTransitionPeriod,
		p.EvictionMaxPodsPerCycle, p.Ranking})
}

func (p *Policy) UnmarshalJSON(data []byte) error {
	var j policyJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	deref := func(m *map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		if *m == nil {
			return map[string]string{}
		}
		return *m
	}
	*p = Policy{deref(j.EvictionHard), deref(j.EvictionSoft), deref(j.EvictionSoftGracePeriod),
		deref(j.EvictionMinimumReclaim), j.EvictionMaxPodGracePeriod, j.EvictionPressureTransitionPeriod,
		j.EvictionMaxPodsPerCycle, j.Ranking}
	return nil
}

// With returns a copy of the policy with another ranking and cycle size.
func (p Policy) With(ranking string, maxPodsPerCycle int) Policy {
	p.Ranking = ranking
	p.EvictionMaxPodsPerCycle = maxPodsPerCycle
	return p
}

// ReadCase reads a case file.
func ReadCase(path string) (*Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Case
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.Judge.Kind == "" {
		return nil, fmt.Errorf("%s: judge.kind: expected \"eviction\"", path)
	}
	return &c, nil
}

// Marshal writes the case as indented JSON.
func (c *Case) Marshal() ([]byte, error) {
	data, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// Snapshot returns the case's snapshot alone (what `explain` reads), as JSON.
func (c *Case) Snapshot() ([]byte, error) {
	s := *c
	s.Judge = Judge{}
	data, err := json.Marshal(struct {
		Nodes                []v1.Node                      `json:"nodes"`
		Pods                 []v1.Pod                       `json:"pods"`
		PriorityClasses      []schedulingv1.PriorityClass   `json:"priorityClasses,omitempty"`
		PodDisruptionBudgets []policyv1.PodDisruptionBudget `json:"podDisruptionBudgets,omitempty"`
		Stats                map[string]*statsapi.Summary   `json:"stats,omitempty"`
	}{s.Nodes, s.Pods, s.PriorityClasses, s.PodDisruptionBudgets, s.Stats})
	return data, err
}

// Clone returns a deep copy (through JSON, as every member is an API object).
func (c *Case) Clone() *Case {
	data, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	var out Case
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return &out
}

// PodKey is the key nodewarden prints: "namespace/name".
func PodKey(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// SplitKey splits "namespace/name".
func SplitKey(key string) (string, string) {
	ns, name, _ := strings.Cut(key, "/")
	return ns, name
}

// Stored returns every pod of the case (incoming ones included) as the API server stores and
// serves it, by UID: the case's own objects, or, for a hand-written case, each put through
// CreatePod; either way through JSON, as a kubelet reads them (a quantity's format is the
// one its text gives: "211500000" is DecimalSI there, whatever the value was built with).
func (c *Case) Stored() (map[types.UID]*v1.Pod, error) {
	out := map[types.UID]*v1.Pod{}
	all := append(append([]v1.Pod{}, c.Pods...), c.Judge.Incoming...)
	for i := range all {
		p := &all[i]
		if !c.Judge.HandWritten {
			served, err := viaJSON(p)
			if err != nil {
				return nil, err
			}
			out[p.UID] = served
			continue
		}
		raw := p.DeepCopy()
		raw.DeletionTimestamp, raw.DeletionGracePeriodSeconds = nil, nil
		stored, err := CreatePod(raw, c.PriorityClasses)
		if err != nil {
			return nil, err
		}
		stored.DeletionTimestamp, stored.DeletionGracePeriodSeconds = p.DeletionTimestamp, p.DeletionGracePeriodSeconds
		served, err := viaJSON(stored)
		if err != nil {
			return nil, err
		}
		out[p.UID] = served
	}
	return out, nil
}

func viaJSON(p *v1.Pod) (*v1.Pod, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var out v1.Pod
	return &out, json.Unmarshal(data, &out)
}

// AsStored returns `pod` as the API server stores it: its stored object with the pod's
// current status (the stored QoS class kept).
func AsStored(pod *v1.Pod, stored map[types.UID]*v1.Pod) *v1.Pod {
	s, ok := stored[pod.UID]
	if !ok {
		return pod
	}
	out := s.DeepCopy()
	qos := out.Status.QOSClass
	out.Status = *pod.Status.DeepCopy()
	if qos != "" {
		out.Status.QOSClass = qos
	}
	return out
}
