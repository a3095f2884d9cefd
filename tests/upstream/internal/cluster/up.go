package cluster

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// RunUp is the `up` subcommand: start a control plane, print its Info as one JSON line on
// stdout, then either run COMMAND (with KUBECONFIG and NW_CLUSTER_INFO set) and tear down
// when it ends, exiting with its status, or wait for SIGTERM, SIGINT or SIGHUP and tear
// down. Progress and errors go to stderr. Exit status: 0 after a clean teardown, 1 when the
// control plane could not start, 2 for a usage error.
func RunUp(args []string) int {
	flags := flag.NewFlagSet("up", flag.ContinueOnError)
	var options Options
	var kubelets, apiserverArgs, schedulerArgs, controllerManagerArgs repeated
	flags.StringVar(&options.Dir, "dir", "", "directory of the run (default: a new temporary directory, removed at exit)")
	flags.Var(&kubelets, "kubelet", "run a stand-in kubelet for node `NODE` (repeatable)")
	flags.StringVar(&options.KubeletAddress, "kubelet-address", "", "`IP` the stand-in kubelets listen on (not loopback: the API server will not proxy to it)")
	flags.BoolVar(&options.NoNodeLeases, "no-node-leases", false, "do not renew the Nodes' Leases as kubelets would")
	flags.Var(&apiserverArgs, "apiserver-arg", "extra kube-apiserver `FLAG` (repeatable)")
	flags.Var(&schedulerArgs, "scheduler-arg", "extra kube-scheduler `FLAG` (repeatable)")
	flags.Var(&controllerManagerArgs, "controller-manager-arg", "extra kube-controller-manager `FLAG` (repeatable)")
	flags.DurationVar(&options.ReadyTimeout, "timeout", 240*time.Second, "give up when not ready after this long")
	keep := flags.Bool("keep", false, "keep the temporary directory (the default --dir) at exit")
	removeOrphaned := flags.Bool("remove-dir-if-orphaned", false, "remove --dir at exit when the process that started us has died (a killed test)")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	command := flags.Args()
	options.Kubelets, options.APIServerArgs = kubelets, apiserverArgs
	options.SchedulerArgs, options.ControllerManagerArgs = schedulerArgs, controllerManagerArgs
	options.Progress = prefixWriter{}

	// Teardown on these signals; SIGTERM is also what the test that started us sends, and
	// what the kernel sends when that test dies (PR_SET_PDEATHSIG, set in main).
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	parent := os.Getppid()
	if *removeOrphaned && options.Dir != "" {
		dir := options.Dir
		defer func() {
			if os.Getppid() != parent {
				os.RemoveAll(dir)
			}
		}()
	}
	if options.Dir == "" {
		dir, err := os.MkdirTemp("", "nw-control-plane-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "up: %v\n", err)
			return 1
		}
		options.Dir = dir
		if !*keep {
			defer os.RemoveAll(dir)
		}
	}
	started := make(chan struct{})
	var c *Cluster
	var startErr error
	go func() {
		c, startErr = Start(options)
		close(started)
	}()
	select {
	case <-started:
	case sig := <-signals:
		fmt.Fprintf(os.Stderr, "up: %v while starting; stopping\n", sig)
		<-started
		if c != nil {
			c.Stop()
		}
		return 1
	}
	if startErr != nil {
		fmt.Fprintf(os.Stderr, "up: %v\n", startErr)
		return 1
	}
	defer c.Stop()
	line, _ := json.Marshal(c.Info)
	fmt.Println(string(line))

	if len(command) == 0 {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "up: %v; stopping the control plane\n", sig)
		return 0
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "NW_CLUSTER_INFO="+c.Dir+"/cluster.json")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	request := spawnRequest{cmd: cmd, done: make(chan error)}
	spawnRequests <- request
	if err := <-request.done; err != nil {
		fmt.Fprintf(os.Stderr, "up: %v\n", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case sig := <-signals:
		_ = cmd.Process.Signal(sig)
		err = <-done
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if exit.ExitCode() >= 0 {
			return exit.ExitCode()
		}
		return 1
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "up: %v\n", err)
		return 1
	}
	return 0
}

// prefixWriter writes progress lines to stderr, each prefixed with "up: ".
type prefixWriter struct{}

func (prefixWriter) Write(p []byte) (int, error) {
	fmt.Fprint(os.Stderr, "up: "+string(p))
	return len(p), nil
}
