package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"

	"nodewarden.test/upstream/internal/scenario"
)

// nodewarden runs the real CLI on files in a directory of the case's own: through a batch
// process (`nodewarden explain --batch -`, docs/reference.md §1.5: each question answered
// exactly as the command alone answers it) kept by the worker, or one process per question.
type nodewarden struct {
	bin   string
	dir   string
	n     int
	batch *batch // nil: one process per question
	// runs counts the questions asked.
	runs int
	// stepper is tests/judges/agent_stepper (agent.go); "" leaves the agent out.
	stepper string
}

// batch is one `nodewarden explain --batch -` process, asked one question at a time.
type batch struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	// broken: the process stopped answering (it is started again for the next case).
	broken bool
}

func startBatch(bin string) (*batch, error) {
	cmd := exec.Command(bin, "explain", "--batch", "-")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &batch{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}, nil
}

// ask sends the arguments of one explain command and reads its answer.
func (b *batch) ask(args []string) (exit int, stdout, stderr string, err error) {
	line, err := json.Marshal(args)
	if err != nil {
		return 0, "", "", err
	}
	if _, err := b.in.Write(append(line, '\n')); err != nil {
		b.broken = true
		return 0, "", "", fmt.Errorf("nodewarden explain --batch: %w", err)
	}
	reply, err := b.out.ReadBytes('\n')
	if err != nil {
		b.broken = true
		return 0, "", "", fmt.Errorf("nodewarden explain --batch %s: no answer: %w", string(line), err)
	}
	var r struct {
		Exit   int    `json:"exit"`
		Stdout string `json:"stdout"`
		Stderr string `json:"stderr"`
	}
	if err := json.Unmarshal(reply, &r); err != nil {
		return 0, "", "", fmt.Errorf("nodewarden explain --batch: %w", err)
	}
	return r.Exit, r.Stdout, r.Stderr, nil
}

func (b *batch) close() {
	b.in.Close()
	_ = b.cmd.Wait()
}

// evictionOut is `explain eviction -o json` (docs/reference.md §4.7).
type evictionOut struct {
	Node    string `json:"node"`
	Signals []struct {
		Signal    string `json:"signal"`
		Available int64  `json:"available"`
		Capacity  int64  `json:"capacity"`
		Threshold int64  `json:"threshold"`
		Kind      string `json:"kind"`
		Met       bool   `json:"met"`
	} `json:"signals"`
	Conditions []string            `json:"conditions"`
	Ranking    map[string][]string `json:"ranking"`
	Evict      []evictOut          `json:"evict"`
}

type evictOut struct {
	Pod                string `json:"pod"`
	Signal             string `json:"signal"`
	GracePeriodSeconds int64  `json:"gracePeriodSeconds"`
	Message            string `json:"message"`
}

// admissionOut is `explain admission -o json` (docs/reference.md §5).
type admissionOut struct {
	Pod     string   `json:"pod"`
	Node    string   `json:"node"`
	Verdict string   `json:"verdict"`
	Reason  string   `json:"reason"`
	Message string   `json:"message"`
	Victims []string `json:"victims"`
}

// invocation is one run of the CLI, kept so a disagreement can say how to repeat it.
type invocation struct {
	args  []string
	files map[string][]byte // file name in the case directory -> content
}

func (n *nodewarden) write(name string, data []byte) (string, error) {
	path := filepath.Join(n.dir, name)
	return path, os.WriteFile(path, data, 0o644)
}

func (n *nodewarden) run(args []string) ([]byte, error) {
	n.runs++
	if n.batch != nil && args[0] == "explain" {
		exit, stdout, stderr, err := n.batch.ask(args[1:])
		if err != nil {
			return nil, err
		}
		if exit != 0 {
			return nil, fmt.Errorf("nodewarden %s: exit status %d: %s", strings.Join(args, " "), exit, strings.TrimSpace(stderr))
		}
		return []byte(stdout), nil
	}
	cmd := exec.Command(n.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("nodewarden %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// files writes a snapshot and a policy for one question; the names carry a counter so the
// files of every question of a case stay side by side for a reader.
func (n *nodewarden) files(tag string, snapshot []byte, policy scenario.Policy) (string, string, error) {
	n.n++
	snapPath, err := n.write(fmt.Sprintf("%02d-%s.snapshot.json", n.n, tag), snapshot)
	if err != nil {
		return "", "", err
	}
	pol, err := json.MarshalIndent(policy, "", " ")
	if err != nil {
		return "", "", err
	}
	polPath, err := n.write(fmt.Sprintf("%02d-%s.policy.json", n.n, tag), pol)
	return snapPath, polPath, err
}

// explainEviction asks `explain eviction` about the node of `snapshot` under `policy`.
func (n *nodewarden) explainEviction(tag string, snapshot []byte, policy scenario.Policy, graceElapsed bool) (*evictionOut, []string, error) {
	snapPath, polPath, err := n.files(tag, snapshot, policy)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"explain", "eviction", "--snapshot", snapPath, "--policy", polPath, "-o", "json"}
	if graceElapsed {
		args = append(args, "--assume-grace-elapsed")
	}
	out, err := n.run(args)
	args = append([]string{"nodewarden"}, args...)
	if err != nil {
		return nil, args, err
	}
	var e evictionOut
	if err := json.Unmarshal(out, &e); err != nil {
		return nil, args, fmt.Errorf("explain eviction -o json: %w", err)
	}
	return &e, args, nil
}

// explainAdmission asks `explain admission` about `pod` bound to `node`.
func (n *nodewarden) explainAdmission(tag string, snapshot []byte, node string, pod *v1.Pod, policy scenario.Policy) (*admissionOut, []string, error) {
	snapPath, polPath, err := n.files(tag, snapshot, policy)
	if err != nil {
		return nil, nil, err
	}
	data, err := json.MarshalIndent(pod, "", " ")
	if err != nil {
		return nil, nil, err
	}
	podPath, err := n.write(fmt.Sprintf("%02d-%s.pod.json", n.n, tag), data)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"explain", "admission", "--snapshot", snapPath, "--node", node, "--pod", podPath, "--policy", polPath, "-o", "json"}
	out, err := n.run(args)
	args = append([]string{"nodewarden"}, args...)
	if err != nil {
		return nil, args, err
	}
	var a admissionOut
	if err := json.Unmarshal(out, &a); err != nil {
		return nil, args, fmt.Errorf("explain admission -o json: %w", err)
	}
	return &a, args, nil
}

// checkPolicy runs `check-policy` and says whether nodewarden accepts the policy.
func (n *nodewarden) checkPolicy(policy scenario.Policy) (bool, string, error) {
	pol, err := json.MarshalIndent(policy, "", " ")
	if err != nil {
		return false, "", err
	}
	n.n++
	path, err := n.write(fmt.Sprintf("%02d-check.policy.json", n.n), pol)
	if err != nil {
		return false, "", err
	}
	n.runs++
	cmd := exec.Command(n.bin, "check-policy", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok && exit.ExitCode() == 1 {
		return false, strings.TrimSpace(stderr.String()), nil
	}
	return err == nil, strings.TrimSpace(stderr.String()), err
}
