package scenario

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/helper/qos"
	corev1conv "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/apis/core/validation"
)

// Built-in priority classes (k8s.io/kubernetes/pkg/apis/scheduling: SystemCriticalPriority).
const (
	SystemClusterCritical = "system-cluster-critical"
	SystemNodeCritical    = "system-node-critical"
	systemCriticalValue   = 2000000000
)

// CreatePod does to `raw` what the API server does to a pod it creates, with the default
// feature gates of the Kubernetes version this module is built from: the v1 defaults
// (SetObjectDefaults_Pod: requests defaulted from limits, grace period, ...), the Priority
// admission plugin (spec.priority and spec.preemptionPolicy from the class, or from the
// global default class), PrepareForCreate (pod-level resource defaults, status.qosClass)
// and validation. A pod the API server would refuse is an error: scenarios hold only pods
// that can exist. Status other than qosClass is left for the kubelet's side (Running).
func CreatePod(raw *v1.Pod, classes []schedulingv1.PriorityClass) (*v1.Pod, error) {
	pod := raw.DeepCopy()
	status := pod.Status
	corev1conv.SetObjectDefaults_Pod(pod)
	if err := admitPriority(pod, classes); err != nil {
		return nil, err
	}
	var internal core.Pod
	if err := corev1conv.Convert_v1_Pod_To_core_Pod(pod, &internal, nil); err != nil {
		return nil, fmt.Errorf("converting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	podutil.DefaultPodLevelResources(&internal)
	internal.Status.QOSClass = qos.GetPodQOS(&internal)
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&internal.Spec, nil, &internal.ObjectMeta, nil)
	opts.ResourceIsPod = true
	if errs := validation.ValidatePodCreate(&internal, opts); len(errs) > 0 {
		return nil, fmt.Errorf("the API server would refuse pod %s/%s: %v", pod.Namespace, pod.Name, errs.ToAggregate())
	}
	var out v1.Pod
	if err := corev1conv.Convert_core_Pod_To_v1_Pod(&internal, &out, nil); err != nil {
		return nil, fmt.Errorf("converting pod %s/%s back: %w", pod.Namespace, pod.Name, err)
	}
	qosClass := out.Status.QOSClass
	out.Status = status
	out.Status.QOSClass = qosClass
	return &out, nil
}

// admitPriority is the Priority admission plugin's create path
// (plugin/pkg/admission/priority: admitPod, establishPriority).
func admitPriority(pod *v1.Pod, classes []schedulingv1.PriorityClass) error {
	name := pod.Spec.PriorityClassName
	var value int32
	var policy *v1.PreemptionPolicy
	switch {
	case name == SystemClusterCritical:
		value, policy = systemCriticalValue, ptrTo(v1.PreemptLowerPriority)
	case name == SystemNodeCritical:
		value, policy = systemCriticalValue+1000, ptrTo(v1.PreemptLowerPriority)
	case name != "":
		found := false
		for i := range classes {
			if classes[i].Name == name {
				value, policy, found = classes[i].Value, classes[i].PreemptionPolicy, true
				break
			}
		}
		if !found {
			return fmt.Errorf("no PriorityClass with name %s was found", name)
		}
	default:
		// With no global default class the plugin still states the policy
		// (getDefaultPriority: PreemptLowerPriority), so a pod with neither a class nor a
		// default cannot ask for Never (the real API server's answer, found by the
		// scheduler's judge).
		policy = ptrTo(v1.PreemptLowerPriority)
		for i := range classes {
			if classes[i].GlobalDefault {
				name, value, policy = classes[i].Name, classes[i].Value, classes[i].PreemptionPolicy
				break
			}
		}
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return fmt.Errorf("spec.priority %d differs from the class's %d", *pod.Spec.Priority, value)
	}
	pod.Spec.PriorityClassName = name
	pod.Spec.Priority = &value
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return fmt.Errorf("spec.preemptionPolicy %s differs from the class's %s", *pod.Spec.PreemptionPolicy, *policy)
		}
		p := *policy
		pod.Spec.PreemptionPolicy = &p
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }
