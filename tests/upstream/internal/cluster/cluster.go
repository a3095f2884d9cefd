// Package cluster starts a real Kubernetes control plane for one test: etcd, kube-apiserver,
// kube-scheduler and kube-controller-manager as child processes (subcommands of the
// nw-control-plane binary) on 127.0.0.1 with ports free at the time, certificates and
// service-account keys made for the run, an admin kubeconfig, and optionally stand-in
// kubelets that answer the API server's node proxy from files.
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/component-base/version"
)

// Options say what to start; the zero value of every field but Dir is a sensible default.
type Options struct {
	// Binary is the nw-control-plane binary whose subcommands are the components (default:
	// $NW_CONTROL_PLANE, else the running executable; a `go test` using this package sets
	// one of them).
	Binary string
	// Dir holds everything of the run: pki/, logs/, etcd/, kubelets/, the kubeconfigs and
	// cluster.json. Created if missing; never removed here.
	Dir string
	// Kubelets are node names, each answered by a stand-in kubelet on KubeletAddress (HTTPS,
	// a port of its own) that serves files from Dir/kubelets/NODE/ by request path, so
	// GET /stats/summary answers Dir/kubelets/NODE/stats/summary. The API server refuses to
	// proxy to loopback addresses, so KubeletAddress is a private address (run the lane in
	// its own network namespace; see tests/cluster/README.md).
	Kubelets       []string
	KubeletAddress string
	// NoNodeLeases stops the launcher from renewing every Node's Lease in kube-node-lease
	// as a kubelet does (every 5 s). Without renewal the node-lifecycle controller marks a
	// node's Ready condition Unknown after its grace period (50 s) and taints it
	// unreachable.
	NoNodeLeases bool
	// Extra flags appended to each component's command line (they win over the defaults).
	APIServerArgs, SchedulerArgs, ControllerManagerArgs []string
	// ReadyTimeout bounds the whole start (default 240 s: a busy 2-core machine).
	ReadyTimeout time.Duration
	// Progress receives one line per step (nil: discarded).
	Progress io.Writer
}

// KubeletEndpoint is where a stand-in kubelet listens; put Address in the Node's
// status.addresses (type InternalIP) and Port in status.daemonEndpoints.kubeletEndpoint.
type KubeletEndpoint struct {
	Address    string `json:"address"`
	Port       int    `json:"port"`
	Root       string `json:"root"`       // files served, by request path
	RequestLog string `json:"requestLog"` // one line per request: METHOD URI CLIENT-CN
}

// Info describes a running control plane; `up` prints it as one JSON line and writes it to
// Dir/cluster.json.
type Info struct {
	Version        string                     `json:"version"`
	Dir            string                     `json:"dir"`
	Kubeconfig     string                     `json:"kubeconfig"`
	Server         string                     `json:"server"`
	CAFile         string                     `json:"caFile"`
	CAKeyFile      string                     `json:"caKeyFile"`
	ClientCertFile string                     `json:"clientCertFile"`
	ClientKeyFile  string                     `json:"clientKeyFile"`
	Ports          map[string]int             `json:"ports"`
	PIDs           map[string]int             `json:"pids"`
	Logs           string                     `json:"logs"`
	Kubelets       map[string]KubeletEndpoint `json:"kubelets"`
	ReadySeconds   float64                    `json:"readySeconds"`
}

// Cluster is a running control plane. Stop ends it; the children also die with the
// process that started them (PR_SET_PDEATHSIG).
type Cluster struct {
	Info
	processes  []*process // in start order
	kubelets   []*http.Server
	cancel     context.CancelFunc
	background sync.WaitGroup
}

// Start starts a control plane and returns once every component answers ready, the
// `default` ServiceAccount exists (pods can be created in `default`) and the stand-in
// kubelets listen.
func Start(options Options) (*Cluster, error) {
	begin := time.Now()
	if options.Dir == "" {
		return nil, errors.New("cluster: Options.Dir is required")
	}
	if options.Binary == "" {
		options.Binary = os.Getenv("NW_CONTROL_PLANE")
	}
	if options.Binary == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		options.Binary = self
	}
	if options.ReadyTimeout == 0 {
		options.ReadyTimeout = 240 * time.Second
	}
	if len(options.Kubelets) > 0 && net.ParseIP(options.KubeletAddress) == nil {
		return nil, fmt.Errorf("cluster: stand-in kubelets need an IP address to listen on, got %q", options.KubeletAddress)
	}
	progress := options.Progress
	if progress == nil {
		progress = io.Discard
	}
	dir, err := filepath.Abs(options.Dir)
	if err != nil {
		return nil, err
	}
	pki, logs := filepath.Join(dir, "pki"), filepath.Join(dir, "logs")
	for _, d := range []string{dir, pki, logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}

	files, err := makePKI(pki, options)
	if err != nil {
		return nil, err
	}
	deadline := begin.Add(options.ReadyTimeout)
	c := &Cluster{Info: Info{
		Version:        version.Get().GitVersion,
		Dir:            dir,
		Kubeconfig:     filepath.Join(dir, "admin.kubeconfig"),
		CAFile:         files.ca,
		CAKeyFile:      files.caKey,
		ClientCertFile: files.adminCert,
		ClientKeyFile:  files.adminKey,
		Logs:           logs,
		Kubelets:       map[string]KubeletEndpoint{},
	}}
	// A port taken by someone else between freePorts and the bind fails the start with
	// "address already in use"; a few more tries with new ports get past it.
	for attempt := 1; ; attempt++ {
		err = c.startComponents(options, files, progress, deadline, attempt)
		if err == nil {
			break
		}
		c.stopComponents()
		var busy errPortBusy
		if !errors.As(err, &busy) || attempt == 3 || time.Now().After(deadline) {
			return nil, err
		}
		fmt.Fprintf(progress, "%s: %v; trying again with other ports\n", busy.component, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if err := c.startKubelets(options, files); err != nil {
		c.Stop()
		return nil, err
	}
	if !options.NoNodeLeases {
		client, err := newClientset(c.Kubeconfig)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.background.Add(1)
		go func() {
			defer c.background.Done()
			renewNodeLeases(ctx, client)
		}()
	}
	c.ReadySeconds = time.Since(begin).Seconds()
	if err := c.writeInfo(); err != nil {
		c.Stop()
		return nil, err
	}
	fmt.Fprintf(progress, "control plane %s ready in %.1f s: %s\n", c.Version, c.ReadySeconds, c.Kubeconfig)
	return c, nil
}

type errPortBusy struct{ component string }

func (e errPortBusy) Error() string { return e.component + ": a port was taken before it bound it" }

// pkiFiles are the paths of what makePKI wrote.
type pkiFiles struct {
	ca, caKey                                                 string
	apiserverCert, apiserverKey                               string
	kubeletClientCert, kubeletClientKey                       string
	adminCert, adminKey                                       string
	schedulerCert, schedulerKey                               string
	controllerManagerCert, controllerManagerKey               string
	schedulerServingCert, schedulerServingKey                 string
	controllerManagerServingCert, controllerManagerServingKey string
	serviceAccountKey, serviceAccountPub                      string
	authority                                                 *authority
}

func makePKI(dir string, options Options) (*pkiFiles, error) {
	ca, err := newAuthority("nodewarden-test-ca")
	if err != nil {
		return nil, err
	}
	f := &pkiFiles{authority: ca, ca: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key")}
	if err := os.WriteFile(f.ca, ca.certPEM, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.caKey, ca.keyPEM, 0o600); err != nil {
		return nil, err
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	issue := []struct {
		name      string
		spec      certSpec
		cert, key *string
	}{
		// The names kubeadm gives the API server's certificate, and the first address of the
		// service range (the `kubernetes` Service).
		{"apiserver", certSpec{commonName: "kube-apiserver", server: true,
			ips: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"}}, &f.apiserverCert, &f.apiserverKey},
		{"apiserver-kubelet-client", certSpec{commonName: "kube-apiserver-kubelet-client",
			organization: []string{"system:masters"}, client: true}, &f.kubeletClientCert, &f.kubeletClientKey},
		{"admin", certSpec{commonName: "kubernetes-admin", organization: []string{"system:masters"},
			client: true}, &f.adminCert, &f.adminKey},
		{"kube-scheduler", certSpec{commonName: "system:kube-scheduler", client: true},
			&f.schedulerCert, &f.schedulerKey},
		{"kube-controller-manager", certSpec{commonName: "system:kube-controller-manager", client: true},
			&f.controllerManagerCert, &f.controllerManagerKey},
		{"kube-scheduler-serving", certSpec{commonName: "kube-scheduler", server: true, ips: loopback,
			dnsNames: []string{"localhost"}}, &f.schedulerServingCert, &f.schedulerServingKey},
		{"kube-controller-manager-serving", certSpec{commonName: "kube-controller-manager", server: true,
			ips: loopback, dnsNames: []string{"localhost"}},
			&f.controllerManagerServingCert, &f.controllerManagerServingKey},
	}
	for _, i := range issue {
		if *i.cert, *i.key, err = ca.issueFiles(dir, i.name, i.spec); err != nil {
			return nil, err
		}
	}
	if f.serviceAccountKey, f.serviceAccountPub, err = writeServiceAccountKeys(dir); err != nil {
		return nil, err
	}
	return f, nil
}

func (c *Cluster) startComponents(options Options, f *pkiFiles, progress io.Writer, deadline time.Time, attempt int) error {
	ports, err := freePorts(5)
	if err != nil {
		return err
	}
	c.Ports = map[string]int{"etcd": ports[0], "etcd-peer": ports[1], "kube-apiserver": ports[2],
		"kube-scheduler": ports[3], "kube-controller-manager": ports[4]}
	c.PIDs = map[string]int{}
	c.Server = "https://127.0.0.1:" + strconv.Itoa(c.Ports["kube-apiserver"])
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(c.Ports["etcd"])
	logName := func(component string) string {
		if attempt == 1 {
			return filepath.Join(c.Logs, component+".log")
		}
		return filepath.Join(c.Logs, fmt.Sprintf("%s.%d.log", component, attempt))
	}
	start := func(component string, args ...string) (*process, error) {
		p, err := startProcess(component, logName(component), append([]string{options.Binary, component}, args...))
		if err != nil {
			return nil, err
		}
		c.processes = append(c.processes, p)
		c.PIDs[component] = p.cmd.Process.Pid
		return p, nil
	}
	begin := time.Now()
	step := func(what string) { fmt.Fprintf(progress, "%s ready after %.1f s\n", what, time.Since(begin).Seconds()) }

	etcdDir := filepath.Join(c.Dir, "etcd")
	if attempt > 1 {
		etcdDir = filepath.Join(c.Dir, fmt.Sprintf("etcd.%d", attempt))
	}
	etcd, err := start("etcd", "--data-dir", etcdDir, "--listen-client-url", etcdURL,
		"--listen-peer-url", "http://127.0.0.1:"+strconv.Itoa(c.Ports["etcd-peer"]))
	if err != nil {
		return err
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if err := c.waitFor(deadline, "etcd", func() error { return get(plain, etcdURL+"/health", `"health":"true"`) }); err != nil {
		return err
	}
	_ = etcd
	step("etcd")

	// The control plane's flags, as kubeadm sets them where they matter here; everything
	// else keeps upstream's defaults (admission plugins, feature gates, controllers).
	apiserverArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.Ports["kube-apiserver"]),
		// Said outright: guessing it from the default route fails where there is none (the
		// lane's private network namespace).
		"--advertise-address=127.0.0.1",
		// The Service `kubernetes` would point at 127.0.0.1, which EndpointSlices refuse;
		// upstream's own test server turns the reconciler off for a loopback address too.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + f.apiserverCert,
		"--tls-private-key-file=" + f.apiserverKey,
		"--client-ca-file=" + f.ca,
		"--kubelet-client-certificate=" + f.kubeletClientCert,
		"--kubelet-client-key=" + f.kubeletClientKey,
		"--kubelet-certificate-authority=" + f.ca,
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + f.serviceAccountPub,
		"--service-account-signing-key-file=" + f.serviceAccountKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "apiserver-generated"),
	}
	if _, err := start("kube-apiserver", append(apiserverArgs, options.APIServerArgs...)...); err != nil {
		return err
	}
	for _, k := range []struct{ name, user, cert, key string }{
		{"admin", "kubernetes-admin", f.adminCert, f.adminKey},
		{"kube-scheduler", "system:kube-scheduler", f.schedulerCert, f.schedulerKey},
		{"kube-controller-manager", "system:kube-controller-manager", f.controllerManagerCert, f.controllerManagerKey},
	} {
		if err := writeKubeconfig(filepath.Join(c.Dir, k.name+".kubeconfig"), c.Server, f.ca, k.user, k.cert, k.key); err != nil {
			return err
		}
	}
	// The scheduler and the controller manager start once the API server is ready: before
	// its RBAC bootstrap they are refused what they read at startup and exit (kubeadm's
	// kubelet restarts them; here nothing would).
	admin, err := c.adminHTTPClient()
	if err != nil {
		return err
	}
	if err := c.waitFor(deadline, "kube-apiserver", func() error { return get(admin, c.Server+"/readyz", "ok") }); err != nil {
		return err
	}
	step("kube-apiserver")

	schedulerConfig := filepath.Join(c.Dir, "kube-scheduler.kubeconfig")
	schedulerArgs := []string{
		"--kubeconfig=" + schedulerConfig,
		"--authentication-kubeconfig=" + schedulerConfig,
		"--authorization-kubeconfig=" + schedulerConfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.Ports["kube-scheduler"]),
		"--tls-cert-file=" + f.schedulerServingCert,
		"--tls-private-key-file=" + f.schedulerServingKey,
		"--client-ca-file=" + f.ca,
		"--leader-elect=false", // one instance: no lease to wait for
		"--profiling=false",
	}
	if _, err := start("kube-scheduler", append(schedulerArgs, options.SchedulerArgs...)...); err != nil {
		return err
	}
	controllerManagerConfig := filepath.Join(c.Dir, "kube-controller-manager.kubeconfig")
	controllerManagerArgs := []string{
		"--kubeconfig=" + controllerManagerConfig,
		"--authentication-kubeconfig=" + controllerManagerConfig,
		"--authorization-kubeconfig=" + controllerManagerConfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.Ports["kube-controller-manager"]),
		"--tls-cert-file=" + f.controllerManagerServingCert,
		"--tls-private-key-file=" + f.controllerManagerServingKey,
		"--client-ca-file=" + f.ca,
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + f.serviceAccountKey,
		"--root-ca-file=" + f.ca,
		"--cluster-signing-cert-file=" + f.ca,
		"--cluster-signing-key-file=" + f.caKey,
		"--profiling=false",
	}
	if _, err := start("kube-controller-manager", append(controllerManagerArgs, options.ControllerManagerArgs...)...); err != nil {
		return err
	}

	local := func(component, path string) func() error {
		return func() error {
			return get(admin, "https://127.0.0.1:"+strconv.Itoa(c.Ports[component])+path, "ok")
		}
	}
	if err := c.waitFor(deadline, "kube-scheduler", local("kube-scheduler", "/readyz")); err != nil {
		return err
	}
	step("kube-scheduler")
	if err := c.waitFor(deadline, "kube-controller-manager", local("kube-controller-manager", "/healthz")); err != nil {
		return err
	}
	step("kube-controller-manager")
	// The ServiceAccount admission plugin refuses pods in a namespace until the
	// serviceaccount controller has made its `default` account.
	if err := c.waitFor(deadline, "the default ServiceAccount", func() error {
		return get(admin, c.Server+"/api/v1/namespaces/default/serviceaccounts/default", "")
	}); err != nil {
		return err
	}
	step("the default ServiceAccount")
	return nil
}

// waitFor polls check every 200 ms until it succeeds, the deadline passes or a component
// exits; errors name the component and quote the end of its log.
func (c *Cluster) waitFor(deadline time.Time, what string, check func() error) error {
	var last error
	for {
		for _, p := range c.processes {
			if !p.running() {
				tail := p.logTail(30)
				if strings.Contains(tail, "address already in use") {
					return errPortBusy{component: p.name}
				}
				return fmt.Errorf("%s exited (%v) while waiting for %s; end of %s:\n%s", p.name, p.err, what, p.logPath, tail)
			}
		}
		if last = check(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready before the deadline: %v (logs in %s)", what, last, c.Logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func get(client *http.Client, url, want string) error {
	response, err := client.Get(url)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(response.Body, 64<<10))
	if response.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, response.Status, strings.TrimSpace(string(body)))
	}
	if !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %q", url, body)
	}
	return nil
}

func (c *Cluster) adminHTTPClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, err
	}
	pool.AppendCertsFromPEM(caPEM)
	pair, err := tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
	}}, nil
}

func (c *Cluster) writeInfo() error {
	data, err := json.MarshalIndent(c.Info, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(c.Dir, ".cluster.json.tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.Dir, "cluster.json"))
}

// Stop ends the stand-in kubelets, the lease renewal and every component, the API server's
// clients first and etcd last. Safe to call twice.
func (c *Cluster) Stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.background.Wait()
	for _, k := range c.kubelets {
		_ = k.Close()
	}
	c.kubelets = nil
	c.stopComponents()
}

func (c *Cluster) stopComponents() {
	// Reverse start order: the controllers and the scheduler, then the API server, then etcd.
	for i := len(c.processes) - 1; i >= 0; i-- {
		c.processes[i].stop(10 * time.Second)
	}
	c.processes = nil
}
