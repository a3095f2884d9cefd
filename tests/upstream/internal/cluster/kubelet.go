package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sync"
)

// A stand-in kubelet: the HTTPS endpoint a Node's kubeletEndpoint names, reached by the API
// server's node proxy (/api/v1/nodes/NODE/proxy/...). It requires the API server's kubelet
// client certificate (signed by the run's CA), as a kubelet with client-CA authentication
// does, and answers GET PATH with the file Root/PATH, so a test writes
// Root/stats/summary to say what /stats/summary returns. Every request is logged.
type stubKubelet struct {
	root    string
	logPath string
	mu      sync.Mutex
}

func (k *stubKubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	client := "-"
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		client = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	k.mu.Lock()
	if log, err := os.OpenFile(k.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(log, "%s %s %s\n", r.Method, r.URL.RequestURI(), client)
		log.Close()
	}
	k.mu.Unlock()
	if r.Method != http.MethodGet {
		http.Error(w, "the stand-in kubelet answers GET only", http.StatusMethodNotAllowed)
		return
	}
	file := filepath.Join(k.root, filepath.FromSlash(path.Clean("/"+r.URL.Path)))
	data, err := os.ReadFile(file)
	if err != nil {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

func (c *Cluster) startKubelets(options Options, f *pkiFiles) error {
	if len(options.Kubelets) == 0 {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(f.authority.cert)
	ip := net.ParseIP(options.KubeletAddress)
	for _, node := range options.Kubelets {
		root := filepath.Join(c.Dir, "kubelets", node)
		if err := os.MkdirAll(filepath.Join(root, "stats"), 0o755); err != nil {
			return err
		}
		// A kubelet's serving certificate names its node and its address.
		certPEM, keyPEM, err := f.authority.issue(certSpec{commonName: node, server: true,
			ips: []net.IP{ip}, dnsNames: []string{node}})
		if err != nil {
			return err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return err
		}
		listener, err := net.Listen("tcp", net.JoinHostPort(options.KubeletAddress, "0"))
		if err != nil {
			return fmt.Errorf("the stand-in kubelet of %s: %w", node, err)
		}
		stub := &stubKubelet{root: root, logPath: filepath.Join(root, "requests.log")}
		server := &http.Server{Handler: stub, TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{pair},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
		}}
		go func() { _ = server.ServeTLS(listener, "", "") }()
		c.kubelets = append(c.kubelets, server)
		port := listener.Addr().(*net.TCPAddr).Port
		c.Kubelets[node] = KubeletEndpoint{Address: options.KubeletAddress, Port: port, Root: root,
			RequestLog: stub.logPath}
	}
	return nil
}
