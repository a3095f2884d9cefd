package cluster

import (
	"encoding/base64"
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// writeKubeconfig writes a kubeconfig as kubeadm does (credentials embedded as *-data), with
// one cluster, user and context, all named after the run.
func writeKubeconfig(path, server, caFile, user, certFile, keyFile string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	b64 := base64.StdEncoding.EncodeToString
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: nodewarden-test
contexts:
- context:
    cluster: nodewarden-test
    user: %s
  name: nodewarden-test
current-context: nodewarden-test
preferences: {}
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
`, b64(ca), server, user, user, b64(cert), b64(key))
	return os.WriteFile(path, []byte(text), 0o600)
}

func newClientset(kubeconfig string) (*kubernetes.Clientset, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	config.UserAgent = "nw-control-plane"
	return kubernetes.NewForConfig(config)
}
