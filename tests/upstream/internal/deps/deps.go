// Package deps names every upstream package the programs of this module are built from, so
// that `go mod tidy` records them all in go.sum before the programs exist.
package deps

import (
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/pkg/kubelet/eviction"
)
