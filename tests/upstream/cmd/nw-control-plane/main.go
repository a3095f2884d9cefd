// nw-control-plane is Kubernetes' own control plane for nodewarden's tests, built from the
// release named in go.mod: one binary whose subcommands are the upstream programs
// (kube-apiserver, kube-scheduler, kube-controller-manager, their cmd/*/app packages, and
// etcd around go.etcd.io/etcd/server/v3/embed), plus `up`, which starts a whole control plane
// on loopback with certificates made for the run (see tests/cluster/README.md).
//
//	nw-control-plane up [flags] [-- COMMAND ARGS...]
//	nw-control-plane kube-apiserver|kube-scheduler|kube-controller-manager FLAGS...
//	nw-control-plane etcd --data-dir DIR --listen-client-url URL --listen-peer-url URL
//	nw-control-plane version
package main

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	_ "time/tzdata" // the upstream mains link it for CronJob time zones

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json, as upstream's mains
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream's mains
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric, as upstream's mains
	"k8s.io/component-base/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"

	"nodewarden.test/upstream/internal/cluster"
)

func init() {
	// `up` ends its control plane when the process that started it dies: the kernel sends
	// SIGTERM (PR_SET_PDEATHSIG) when the parent thread exits, and Go's main thread, to which
	// init pins the main goroutine here, never exits.
	if len(os.Args) > 1 && os.Args[1] == "up" {
		runtime.LockOSThread()
		_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	sub, args := os.Args[1], os.Args[2:]
	// Each upstream command parses the arguments after its own name, as its binary would.
	runUpstream := func(command *cobra.Command) {
		command.SetArgs(args)
		os.Exit(cli.Run(command))
	}
	switch sub {
	case "kube-apiserver":
		runUpstream(apiserver.NewAPIServerCommand())
	case "kube-scheduler":
		runUpstream(scheduler.NewSchedulerCommand())
	case "kube-controller-manager":
		runUpstream(controllermanager.NewControllerManagerCommand())
	case "etcd":
		os.Exit(cluster.RunEtcd(args))
	case "up":
		os.Exit(cluster.RunUp(args))
	case "version":
		fmt.Println(version.Get().GitVersion)
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "nw-control-plane: unknown command %q\n", sub)
		usage()
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  nw-control-plane up [--dir DIR] [--kubelet NODE]... [--kubelet-address IP] [-- COMMAND ARGS...]
  nw-control-plane kube-apiserver|kube-scheduler|kube-controller-manager FLAGS...
  nw-control-plane etcd --data-dir DIR --listen-client-url URL --listen-peer-url URL
  nw-control-plane version
run "nw-control-plane up --help" for the launcher's flags
`)
}
