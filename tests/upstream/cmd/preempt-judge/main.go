// preempt-judge runs the real kube-scheduler (on a real control plane: etcd, kube-apiserver,
// kube-scheduler, kube-controller-manager of the release go.mod names, no webhook) over
// generated preemption scenarios and compares what it does with `nodewarden explain
// preemption` and `explain admission` on a snapshot read back from the API server just
// before the preemptor was submitted (tests/judges/README.md).
//
//	preempt-judge --nodewarden BIN --control-plane BIN [--cases N] [--seed S] [--parallel W]
//	              [--control-planes P] [--case FILE|DIR]... [--out DIR]
//	preempt-judge --write SEED        the generated case of SEED, as JSON
//
// Exit status: 0 when every scenario agrees, 1 on a disagreement or an error, 2 usage.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"nodewarden.test/upstream/internal/cluster"
	"nodewarden.test/upstream/internal/scenario"
)

type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func main() { os.Exit(run()) }

func run() int {
	bin := flag.String("nodewarden", "", "the nodewarden `binary` to judge")
	controlPlane := flag.String("control-plane", os.Getenv("NW_CONTROL_PLANE"), "the nw-control-plane `binary` (default $NW_CONTROL_PLANE)")
	cases := flag.Int("cases", 100, "generated scenarios to run (seeds SEED to SEED+N-1)")
	seed := flag.Uint64("seed", 1, "first seed")
	parallel := flag.Int("parallel", 4, "scenarios on the (first) control plane at once")
	planes := flag.Int("control-planes", 1, "control planes to run; the second and later judge, one at a time each, the scenarios with a global default class")
	out := flag.String("out", "", "`dir`ectory for the case files of disagreements (default: a temporary one)")
	write := flag.Int64("write", -1, "print the generated case of `SEED` and exit")
	verbose := flag.Bool("v", false, "print what the scheduler did in each scenario")
	var caseFiles repeated
	flag.Var(&caseFiles, "case", "also judge the case `FILE` (or every *.json of a directory; repeatable)")
	flag.Parse()
	if *write >= 0 {
		c, err := scenario.Preemption(uint64(*write))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		data, _ := json.MarshalIndent(c, "", " ")
		fmt.Println(string(data))
		return 0
	}
	if *bin == "" || *controlPlane == "" {
		fmt.Fprintln(os.Stderr, "preempt-judge: --nodewarden and --control-plane are required")
		return 2
	}
	if isScript(*controlPlane) {
		// build-control-plane.sh wrote a script that says why it could not build.
		why, _ := exec.Command(*controlPlane).CombinedOutput()
		fmt.Printf("preempt-judge: skipped: the control plane was not built: %s\n", strings.TrimSpace(string(why)))
		return 77
	}
	var work []func() (*scenario.PreemptionCase, error)
	for _, f := range caseFiles {
		paths := []string{f}
		if st, err := os.Stat(f); err != nil {
			fmt.Fprintf(os.Stderr, "preempt-judge: --case %s: %v\n", f, err)
			return 2
		} else if st.IsDir() {
			paths, _ = filepath.Glob(filepath.Join(f, "preemption-*.json"))
		}
		for _, p := range paths {
			work = append(work, func() (*scenario.PreemptionCase, error) { return scenario.ReadPreemptionCase(p) })
		}
	}
	for i := 0; i < *cases; i++ {
		s := *seed + uint64(i)
		work = append(work, func() (*scenario.PreemptionCase, error) { return scenario.Preemption(s) })
	}
	if *out == "" {
		dir, err := os.MkdirTemp("", "preempt-judge-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		*out = dir
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nwBin, _ := filepath.Abs(*bin)
	if *planes < 1 {
		fmt.Fprintln(os.Stderr, "preempt-judge: --control-planes must be at least 1")
		return 2
	}

	begin := time.Now()
	// Every control plane starts at once; each one's state lives in a directory of its own.
	type plane struct {
		cs *kubernetes.Clientset
		// A scenario with a global default class runs alone on its plane: the Priority
		// admission plugin would give its value to the pods of every other scenario created
		// meanwhile.
		alone sync.RWMutex
	}
	ps := make([]*plane, *planes)
	startErrs := make([]error, *planes)
	var starting sync.WaitGroup
	version := ""
	for k := range ps {
		starting.Add(1)
		go func(k int) {
			defer starting.Done()
			dir, err := os.MkdirTemp("", "preempt-judge-cluster-")
			if err != nil {
				startErrs[k] = err
				return
			}
			cleanups.add(func() { os.RemoveAll(dir) })
			// The launcher renews every Node's Lease in turn, every 5 s; with dozens of
			// scenarios' nodes on a starved machine one round can outlast the node-lifecycle
			// controller's 50 s grace, which then taints the nodes unreachable in the middle
			// of a scenario (after its snapshot: the scheduler and explain would judge
			// different nodes). A node here is healthy for as long as the run needs it.
			c, err := cluster.Start(cluster.Options{Binary: *controlPlane, Dir: dir, Progress: os.Stderr,
				ControllerManagerArgs: []string{"--node-monitor-grace-period=1h", "--node-startup-grace-period=1h",
					// No namespace controller: scenarios leave their namespaces behind, empty
					// (scenarioRun.tearDown).
					"--controllers=*,-namespace-controller"}})
			if err != nil {
				startErrs[k] = fmt.Errorf("the control plane did not start: %w", err)
				return
			}
			cleanups.add(c.Stop)
			version = c.Version
			config, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
			if err != nil {
				startErrs[k] = err
				return
			}
			config.QPS, config.Burst, config.UserAgent = 500, 1000, "preempt-judge"
			cs, err := kubernetes.NewForConfig(config)
			if err != nil {
				startErrs[k] = err
				return
			}
			ps[k] = &plane{cs: cs}
		}(k)
	}
	fmt.Printf("preempt-judge: starting %d control plane(s) (%s)\n", *planes, *controlPlane)
	starting.Wait()
	defer cleanups.run()
	for _, err := range startErrs {
		if err != nil {
			fmt.Fprintf(os.Stderr, "preempt-judge: %v\n", err)
			return 1
		}
	}
	fmt.Printf("preempt-judge: control plane %s ready in %.1fs; %d scenarios, %d at once\n", version, time.Since(begin).Seconds(), len(work), *parallel)

	ctx := context.Background()
	var mu sync.Mutex
	tally := &tally{kinds: map[string]int{}}
	type job struct {
		pc  *scenario.PreemptionCase
		err error
	}
	// With one control plane every scenario goes to it (those with a global default class
	// alone). With more, the first takes every scenario without a global default,
	// `parallel` at once, and each of the others takes those with one, one at a time, so
	// that they no longer drain the first plane.
	ordinary, global := make(chan job), make(chan job)
	var wg sync.WaitGroup
	worker := func(p *plane, jobs <-chan job) {
		defer wg.Done()
		nw := &nodewarden{bin: nwBin}
		defer nw.close()
		for j := range jobs {
			pc, err := j.pc, j.err
			var res *result
			if err == nil {
				if pc.HasGlobalDefault() {
					p.alone.Lock()
					res, err = judge(ctx, p.cs, nw, pc, *out)
					p.alone.Unlock()
				} else {
					p.alone.RLock()
					res, err = judge(ctx, p.cs, nw, pc, *out)
					p.alone.RUnlock()
				}
			}
			mu.Lock()
			if *verbose && res != nil {
				fmt.Printf("seed %d: the scheduler %s\n", pc.Seed, res.scheduler.describe())
			}
			tally.add(pc, res, err)
			if tally.n%50 == 0 {
				fmt.Printf("preempt-judge: %d/%d scenarios, %d agree (%.0fs)\n", tally.n, len(work), tally.agree, time.Since(begin).Seconds())
			}
			mu.Unlock()
		}
	}
	for w := 0; w < *parallel; w++ {
		wg.Add(1)
		go worker(ps[0], ordinary)
	}
	for _, p := range ps[1:] {
		wg.Add(1)
		go worker(p, global)
	}
	// Each queue has a feeder of its own, so that a plane busy with a global default
	// scenario holds up no other.
	var toOrdinary, toGlobal []int
	for i := range work {
		if len(ps) > 1 && globalDefault(work[i]) {
			toGlobal = append(toGlobal, i)
		} else {
			toOrdinary = append(toOrdinary, i)
		}
	}
	feed := func(jobs chan<- job, which []int) {
		for _, i := range which {
			pc, err := work[i]()
			jobs <- job{pc, err}
		}
		close(jobs)
	}
	go feed(global, toGlobal)
	feed(ordinary, toOrdinary)
	wg.Wait()
	return tally.report(time.Since(begin), *seed, *cases, *out)
}

// globalDefault says whether the scenario `load` reads has a global default class (false
// when it cannot be read: the worker that loads it again reports the error).
func globalDefault(load func() (*scenario.PreemptionCase, error)) bool {
	pc, err := load()
	return err == nil && pc.HasGlobalDefault()
}

// cleanups are run in reverse order on the way out (control planes stopped, their
// directories removed).
var cleanups cleanupList

type cleanupList struct {
	mu sync.Mutex
	fs []func()
}

func (l *cleanupList) add(f func()) { l.mu.Lock(); l.fs = append(l.fs, f); l.mu.Unlock() }

func (l *cleanupList) run() {
	for i := len(l.fs) - 1; i >= 0; i-- {
		l.fs[i]()
	}
}

type tally struct {
	n, agree, errors int
	kinds            map[string]int
	ties             int
	setDifferences   int // scenarios with a node where only the documented request-set difference stood
	victimTies       int // scenarios explain agrees on only with pods of equal priority and start time in another order
	disagreements    []string
}

func (t *tally) add(c *scenario.PreemptionCase, r *result, err error) {
	t.n++
	name := "?"
	if c != nil {
		name = fmt.Sprintf("seed %d (%s)", c.Seed, c.Prefix)
	}
	if err != nil {
		t.errors++
		t.disagreements = append(t.disagreements, fmt.Sprintf("%s: error: %v", name, err))
		fmt.Printf("ERROR %s: %v\n", name, err)
		return
	}
	t.kinds[r.scheduler.Kind]++
	if r.tie {
		t.ties++
	}
	if len(r.setDifference) > 0 {
		t.setDifferences++
	}
	if r.victimTie {
		t.victimTies++
	}
	if len(r.problems) == 0 {
		t.agree++
		return
	}
	text := fmt.Sprintf("%s: the scheduler %s; %s\n    case: %s\n    %s", name, r.scheduler.describe(),
		strings.Join(r.problems, "; "), r.caseFile, strings.Join(r.commands, "\n    "))
	t.disagreements = append(t.disagreements, text)
	fmt.Printf("DISAGREE %s\n", text)
}

func (t *tally) report(elapsed time.Duration, seed uint64, cases int, out string) int {
	var kinds []string
	for k, n := range t.kinds {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Printf("preempt-judge: %d scenarios (seeds %d to %d and the kept cases) in %.0fs: the scheduler: %s; node ties (several answers acceptable) %d; documented request-set differences (explain admission admits where a resizing pod leaves the scheduler no room) %d; victims chosen in another order of pods equal in priority and start time (documented) %d\n",
		t.n, seed, seed+uint64(cases)-1, elapsed.Seconds(), strings.Join(kinds, ", "), t.ties, t.setDifferences, t.victimTies)
	rate := 0.0
	if t.n > 0 {
		rate = 100 * float64(t.agree) / float64(t.n)
	}
	fmt.Printf("preempt-judge: agreement %d/%d (%.2f%%), errors %d; disagreements kept under %s\n", t.agree, t.n, rate, t.errors, out)
	if t.agree != t.n {
		return 1
	}
	return 0
}

func (o *outcome) describe() string {
	switch o.Kind {
	case "bound":
		return "bound it to " + o.Node + " (it fit)"
	case "preempted":
		return fmt.Sprintf("nominated %s and deleted %v", o.Nominated, o.Victims)
	default:
		return "found no room: " + o.Message
	}
}

// isScript says whether `path` starts with "#!" (the control plane's skip script).
func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 2)
	n, _ := f.Read(head)
	return n == 2 && string(head) == "#!"
}
