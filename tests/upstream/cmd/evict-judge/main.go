// Command evict-judge judges nodewarden's eviction and its eviction admission against the
// kubelet's own eviction manager (k8s.io/kubernetes/pkg/kubelet/eviction), on generated
// cases and on case files. See tests/judges/README.md.
//
//	evict-judge --nodewarden BIN [--cases N] [--seed S] [--case FILE|DIR]... [--out DIR]
//	            [--jobs J] [--process-per-question] [--cpuprofile FILE]
//	evict-judge --write SEED
//
// Exit status: 0 when nodewarden agrees with the kubelet on every comparison (and every
// documented difference is the documented one), 1 otherwise, 2 on a usage error.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"nodewarden.test/upstream/internal/scenario"
)

type caseList []string

func (c *caseList) String() string     { return strings.Join(*c, ",") }
func (c *caseList) Set(v string) error { *c = append(*c, v); return nil }

type work struct {
	file string // a case file, or "" for a generated case
	seed uint64
}

func main() {
	var (
		bin   = flag.String("nodewarden", os.Getenv("NODEWARDEN"), "the nodewarden binary (default $NODEWARDEN, else nodewarden on PATH)")
		cases = flag.Int("cases", 0, "how many cases to generate")
		seed  = flag.Uint64("seed", 1, "the seed of the first generated case; case i has seed S+i")
		out   = flag.String("out", "", "where to write each case nodewarden disagrees on, with the files explain ran on")
		jobs  = flag.Int("jobs", runtime.NumCPU()*2, "cases judged at once")
		write = flag.String("write", "", "write the generated case of this seed to standard output and exit")
		prof  = flag.String("cpuprofile", "", "write a CPU profile of the judge itself to this file")
		alone = flag.Bool("process-per-question", false, "run one nodewarden process per question instead of one `nodewarden explain --batch -` per worker")
		agent = flag.String("agent-stepper", "", "tests/judges/agent_stepper of the build: also judge the agent's own decision, cycle by cycle")
		files caseList
	)
	flag.Var(&files, "case", "a case file, or a directory of them (*.json); repeatable")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: evict-judge [--nodewarden BIN] [--cases N] [--seed S] [--case FILE|DIR]... [--out DIR] [--jobs J]\n"+
			"       evict-judge --write SEED\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	klog.SetLogger(discardLogger())
	if *write != "" {
		var s uint64
		if _, err := fmt.Sscan(*write, &s); err != nil {
			fmt.Fprintf(os.Stderr, "evict-judge: --write: expected a seed, got %q\n", *write)
			os.Exit(2)
		}
		c, err := scenario.Eviction(s)
		if err == nil {
			var data []byte
			if data, err = c.Marshal(); err == nil {
				_, err = os.Stdout.Write(data)
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "evict-judge: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() != 0 || (*cases == 0 && len(files) == 0) || *jobs < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if *bin == "" {
		*bin = "nodewarden"
	}
	if _, err := os.Stat(*bin); err != nil {
		fmt.Fprintf(os.Stderr, "evict-judge: --nodewarden %s: %v\n", *bin, err)
		os.Exit(2)
	}
	var items []work
	for _, f := range files {
		found, err := caseFiles(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "evict-judge: --case %s: %v\n", f, err)
			os.Exit(2)
		}
		for _, p := range found {
			items = append(items, work{file: p})
		}
	}
	for i := 0; i < *cases; i++ {
		items = append(items, work{seed: *seed + uint64(i)})
	}
	tmp, err := os.MkdirTemp("", "evict-judge-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "evict-judge: %v\n", err)
		os.Exit(2)
	}
	defer os.RemoveAll(tmp)

	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			fmt.Fprintf(os.Stderr, "evict-judge: %v\n", err)
			os.Exit(2)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	began := time.Now()
	reports := make([]*report, len(items))
	var wg sync.WaitGroup
	next := make(chan int)
	for j := 0; j < *jobs; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b *batch
			if !*alone {
				var err error
				if b, err = startBatch(*bin); err != nil {
					fmt.Fprintf(os.Stderr, "evict-judge: %v\n", err)
					os.Exit(2)
				}
			}
			for i := range next {
				reports[i] = judgeOne(items[i], *bin, stepperPath(*agent), b, filepath.Join(tmp, fmt.Sprint(i)), *out)
				if b != nil && b.broken {
					b.close()
					var err error
					if b, err = startBatch(*bin); err != nil {
						fmt.Fprintf(os.Stderr, "evict-judge: %v\n", err)
						os.Exit(2)
					}
				}
			}
			if b != nil {
				b.close()
			}
		}()
	}
	for i := range items {
		next <- i
	}
	close(next)
	wg.Wait()
	status := summarize(reports, items, *seed, *cases, time.Since(began))
	pprof.StopCPUProfile()
	os.RemoveAll(tmp)
	os.Exit(status)
}

// caseFiles lists a case file, or the *.json files of a directory.
func caseFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	found, err := filepath.Glob(filepath.Join(path, "*.json"))
	sort.Strings(found)
	return found, err
}

// judgeOne loads or generates a case and judges it in a directory of its own, kept under
// `out` when nodewarden disagrees.
func judgeOne(w work, bin, stepper string, b *batch, dir, out string) *report {
	var c *scenario.Case
	var err error
	name := fmt.Sprintf("seed %d", w.seed)
	if w.file != "" {
		name = w.file
		c, err = scenario.ReadCase(w.file)
	} else {
		c, err = scenario.Eviction(w.seed)
	}
	if err != nil {
		return &report{name: name, err: err, compared: map[string]int{}, agreed: map[string]int{}, seen: map[string]int{}}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &report{name: name, c: c, err: err, compared: map[string]int{}, agreed: map[string]int{}, seen: map[string]int{}}
	}
	nw := &nodewarden{bin: bin, dir: dir, batch: b, stepper: stepper}
	r := judgeCase(c, nw, name)
	if (len(r.diffs) > 0 || r.err != nil) && out != "" {
		keep(r, dir, out)
	}
	os.RemoveAll(dir)
	if len(r.diffs) == 0 && r.err == nil {
		r.c = nil // a run of 10,000 cases keeps only what it reports
	}
	return r
}

// keep writes a case nodewarden disagrees on as OUT/NAME.json, with the files every
// question of it was asked on in OUT/NAME/.
func keep(r *report, dir, out string) {
	base := fmt.Sprintf("eviction-seed-%d", r.c.Judge.Seed)
	if strings.HasSuffix(r.name, ".json") {
		base = strings.TrimSuffix(filepath.Base(r.name), ".json")
	}
	if err := os.MkdirAll(filepath.Join(out, base), 0o755); err != nil {
		r.note("could not keep the case: %v", err)
		return
	}
	if data, err := r.c.Marshal(); err == nil {
		_ = os.WriteFile(filepath.Join(out, base+".json"), data, 0o644)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
			_ = os.WriteFile(filepath.Join(out, base, e.Name()), data, 0o644)
		}
	}
	for i := range r.diffs {
		r.diffs[i] = strings.ReplaceAll(r.diffs[i], dir, filepath.Join(out, base))
	}
	r.note("kept as %s (rerun: evict-judge --case %s)", filepath.Join(out, base+".json"), filepath.Join(out, base+".json"))
}

func summarize(reports []*report, items []work, seed uint64, cases int, took time.Duration) int {
	compared, agreed, seen := map[string]int{}, map[string]int{}, map[string]int{}
	failed, runs, errs, kept := 0, 0, 0, 0
	for i, r := range reports {
		for k, v := range r.compared {
			compared[k] += v
		}
		for k, v := range r.agreed {
			agreed[k] += v
		}
		runs += r.runs
		for k, v := range r.seen {
			seen[k] += v
		}
		if len(r.diffs) == 0 && r.err == nil {
			continue
		}
		failed++
		fmt.Printf("DISAGREE %s", r.name)
		if items[i].file == "" {
			fmt.Printf(" (evict-judge --write %d > case.json; evict-judge --case case.json)", items[i].seed)
		}
		fmt.Println()
		if r.err != nil {
			errs++
			fmt.Printf("  error: %v\n", r.err)
		}
		for _, d := range r.diffs {
			fmt.Printf("  %s\n", d)
		}
		for _, n := range r.notes {
			if strings.HasPrefix(n, "kept as") {
				kept++
			}
			fmt.Printf("  note: %s\n", n)
		}
	}
	files := 0
	for _, it := range items {
		if it.file != "" {
			files++
		}
	}
	desc := []string{}
	if cases > 0 {
		desc = append(desc, fmt.Sprintf("%d generated (seeds %d to %d)", cases, seed, seed+uint64(cases)-1))
	}
	if files > 0 {
		desc = append(desc, fmt.Sprintf("%d from files", files))
	}
	fmt.Printf("evict-judge: %d cases, %s; %d questions to nodewarden; %.1f s\n", len(reports), strings.Join(desc, ", "), runs, took.Seconds())
	kinds := []struct{ kind, what string }{
		{"policy", "policies refused by both parsers, or by nodewarden alone where documented"},
		{"eviction", "kubelet cycles: the pod killed (or none), its grace period and message"},
		{"ranking", "kubelet rankings: the whole order"},
		{"conditions", "node conditions after a cycle"},
		{"admission", "admission handler verdicts"},
		{"prefix", "documented difference: evictionMaxPodsPerCycle > 1 evicts at once what the kubelet kills over cycles"},
		{"priority", "documented difference: ranking \"priority\" follows its documented rule"},
		{"agent", "kubelet cycles against the agent's own loop: the pod ordered (or none), its grace period and message, MemoryPressure"},
	}
	total, totalAgreed := 0, 0
	for _, k := range kinds {
		n, a := compared[k.kind], agreed[k.kind]
		total += n
		totalAgreed += a
		if n == 0 {
			continue
		}
		fmt.Printf("  %-10s %6d/%-6d agree (%6.2f%%)  %s\n", k.kind, a, n, 100*float64(a)/float64(n), k.what)
	}
	for k, n := range compared {
		if strings.HasPrefix(k, "eviction (") {
			fmt.Printf("  not compared: %d cycles, %s\n", n, strings.TrimSuffix(strings.TrimPrefix(k, "eviction ("), ")"))
		}
		if strings.HasPrefix(k, "agent (") {
			fmt.Printf("  agent, %s: %d cycles\n", strings.TrimSuffix(strings.TrimPrefix(k, "agent ("), ")"), n)
		}
	}
	var covered []string
	for k := range seen {
		covered = append(covered, k)
	}
	sort.Strings(covered)
	for _, k := range covered {
		fmt.Printf("  seen: %d %s\n", seen[k], k)
	}
	rate := 100.0
	if total > 0 {
		rate = 100 * float64(totalAgreed) / float64(total)
	}
	fmt.Printf("agreement: %.2f%% (%d of %d comparisons); %d cases disagree", rate, totalAgreed, total, failed)
	if errs > 0 {
		fmt.Printf(", %d of them with errors", errs)
	}
	fmt.Println()
	if failed > 0 {
		return 1
	}
	return 0
}
