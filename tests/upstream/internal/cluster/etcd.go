package cluster

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

// RunEtcd is the `etcd` subcommand: a single-member etcd (go.etcd.io/etcd/server/v3/embed)
// serving plain HTTP on the given loopback URLs until SIGTERM or SIGINT.
func RunEtcd(args []string) int {
	flags := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := flags.String("data-dir", "", "the member's data directory")
	clientURL := flags.String("listen-client-url", "", "client URL, http://127.0.0.1:PORT")
	peerURL := flags.String("listen-peer-url", "", "peer URL, http://127.0.0.1:PORT")
	// The tests' data lives for one run: fsync buys nothing but seconds on a busy disk.
	noFsync := flags.Bool("unsafe-no-fsync", true, "skip fsync (the data lives for one test run)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" || *clientURL == "" || *peerURL == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir, --listen-client-url and --listen-peer-url are required")
		return 2
	}
	client, err := url.Parse(*clientURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: --listen-client-url: %v\n", err)
		return 2
	}
	peer, err := url.Parse(*peerURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: --listen-peer-url: %v\n", err)
		return 2
	}

	cfg := embed.NewConfig()
	cfg.Name = "default"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = *noFsync
	cfg.LogLevel = "warn"

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-server.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready at %s\n", client)
	case err := <-server.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		server.Close()
		return 1
	case <-stop:
		server.Close()
		return 0
	}
	select {
	case err := <-server.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		server.Close()
		return 1
	case <-stop:
		server.Close()
		return 0
	}
}
