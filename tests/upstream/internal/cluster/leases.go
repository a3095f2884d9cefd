package cluster

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// renewNodeLeases does for every Node what its kubelet would: keep its Lease in
// kube-node-lease renewed (every 5 s here; the kubelet's default is 10 s against a 40 s
// lease), so the node-lifecycle controller sees a healthy node, keeps the Ready condition
// the test set, and removes the not-ready taint the TaintNodesByCondition admission plugin
// puts on every new Node once that condition is True. Returns when ctx ends.
func renewNodeLeases(ctx context.Context, client kubernetes.Interface) {
	for {
		if nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
			for i := range nodes.Items {
				renewLease(ctx, client, nodes.Items[i].Name, nodes.Items[i].UID)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

func renewLease(ctx context.Context, client kubernetes.Interface, node string, uid types.UID) {
	leases := client.CoordinationV1().Leases("kube-node-lease")
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		duration := int32(40)
		holder := node
		_, _ = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: "kube-node-lease",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node,
					UID: uid}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration,
				RenewTime: &now},
		}, metav1.CreateOptions{})
		return
	}
	if err != nil {
		return
	}
	lease.Spec.RenewTime = &now
	_, _ = leases.Update(ctx, lease, metav1.UpdateOptions{})
}
