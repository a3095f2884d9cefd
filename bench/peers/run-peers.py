#!/usr/bin/python3
"""nodewarden beside its peers on one scenario, on pure cgroup v2.

Run as root on a pure cgroup v2 host, normally inside the VM lane (see README.md here):
a kubepods cgroup limited to 1 GiB (no swap) holds a priority-100000 pod of 200 MiB, two
priority-0 pods of 100 MiB and a priority-0 hog that grows at --rate MiB/s until something
stops it. The line is 300 MiB under the limit (kubepods usage 724 MiB). Each contender gets
the same scenario --trials times:

  kernel              no agent: the kernel's OOM killer at the 1 GiB limit
  earlyoom-default    earlyoom as documented (-m 10: 10 % of system MemAvailable)
  earlyoom-calibrated earlyoom with -M set by hand to the system MemAvailable at which
                      kubepods reaches the line (computed at the start of each trial)
  oomd                oomd 0.5.0, -i 1 (its shortest interval), a ruleset on kubepods:
                      memory_above 724M or pressure_above 60 % → kill_by_memory_size_or_growth
  nodewarden          nodewarden agent, hard allocatableMemory.available < 300Mi

Measured from outside every contender: a sampler reads kubepods' memory.current about every
millisecond; "crossing" is the first sample at or past the line, "stopped" the sample where
usage peaked (the hog stopped growing); kernel OOM kills are the change of kubepods'
memory.events oom_kill; "died" lists the pods whose processes are gone.
Everything it makes (cgroups, processes, files) is removed at the end of each trial.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

MiB = 1024 * 1024
LIMIT = 1024 * MiB
THRESHOLD = 300 * MiB
LINE = LIMIT - THRESHOLD
ROOT = "/sys/fs/cgroup"
CONTROLLERS = "+memory +cpu +pids +io"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read()


def keyed(path, key):
    for line in read(path).splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == key:
            return int(fields[1])
    return 0


class Scenario:
    """One trial's cgroups and pod processes."""

    def __init__(self, nodewarden, rate, index):
        self.top = f"nwpeers-{os.getpid()}-{index}"
        self.path = f"{ROOT}/{self.top}"
        self.kubepods = f"{self.path}/kubepods"
        self.procs = {}
        self.pods = {}
        self.nodewarden = nodewarden
        self.rate = rate
        os.mkdir(self.path)
        write(f"{self.path}/cgroup.subtree_control", CONTROLLERS)
        os.mkdir(self.kubepods)
        write(f"{self.kubepods}/memory.max", str(LIMIT))
        if os.path.exists(f"{self.kubepods}/memory.swap.max"):
            write(f"{self.kubepods}/memory.swap.max", "0")
        write(f"{self.kubepods}/cgroup.subtree_control", CONTROLLERS)
        for tier in ("burstable", "besteffort"):
            os.mkdir(f"{self.kubepods}/{tier}")
            write(f"{self.kubepods}/{tier}/cgroup.subtree_control", CONTROLLERS)

    def add_pod(self, ns, name, tier, priority, requests, load_args):
        uid = str(uuid.uuid4())
        cgroup = f"{self.kubepods}/{tier}/pod{uid}"
        os.mkdir(cgroup)
        resources = {"requests": requests} if requests else {}
        self.pods[f"{ns}/{name}"] = {
            "cgroup": cgroup,
            "manifest": {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "uid": uid},
                "spec": {"priority": priority, "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "main", "resources": resources}]},
                "status": {"phase": "Running"},
            },
        }

        def enter():
            write(f"{cgroup}/cgroup.procs", str(os.getpid()))

        self.procs[f"{ns}/{name}"] = subprocess.Popen(
            [self.nodewarden, "demo-load", "--lifetime", "60"] + load_args,
            preexec_fn=enter, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def usage(self):
        return int(read(f"{self.kubepods}/memory.current"))

    def oom_kills(self):
        return keyed(f"{self.kubepods}/memory.events", "oom_kill")

    def alive(self, pod):
        return read(f"{self.pods[pod]['cgroup']}/cgroup.procs").strip() != ""

    def destroy(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for dirpath, dirnames, _ in sorted(os.walk(self.path), key=lambda w: -len(w[0])):
            if os.path.exists(f"{dirpath}/cgroup.kill"):
                try:
                    write(f"{dirpath}/cgroup.kill", "1")
                except OSError:
                    pass
        for _ in range(500):
            try:
                for dirpath, _, _ in sorted(os.walk(self.path), key=lambda w: -len(w[0])):
                    os.rmdir(dirpath)
                return
            except OSError:
                time.sleep(0.01)


def mem_available():
    return keyed("/proc/meminfo", "MemAvailable:") * 1024


def start_contender(name, scenario, tools, workdir):
    """Starts the contender; returns (Popen or None, how it was configured)."""
    kube_rel = f"{scenario.top}/kubepods"
    if name == "kernel":
        return None, "no agent"
    if name == "earlyoom-default":
        args = [tools["earlyoom"], "-m", "10", "-r", "0"]
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), \
            " ".join(args[1:])
    if name == "earlyoom-calibrated":
        # The system-wide MemAvailable at which kubepods would reach the line, from the
        # figures now: what kubepods may still grow before the line comes off MemAvailable.
        target = mem_available() - (LINE - scenario.usage())
        args = [tools["earlyoom"], "-M", str(max(1, target // 1024)), "-s", "100", "-r", "0"]
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), \
            f"-M {target // MiB}MiB (MemAvailable when kubepods is at the line) -s 100"
    if name == "oomd":
        config = {"rulesets": [{
            "name": "kubepods protection",
            "detectors": [
                ["kubepods above the line", {"name": "memory_above", "args": {
                    "cgroup": kube_rel, "threshold": f"{LINE // MiB}M", "duration": "0"}}],
                ["kubepods under pressure", {"name": "pressure_above", "args": {
                    "cgroup": kube_rel, "resource": "memory", "threshold": "60",
                    "duration": "0"}}],
            ],
            "actions": [{"name": "kill_by_memory_size_or_growth", "args": {
                "cgroup": f"{kube_rel}/*/*", "post_action_delay": "1"}}],
        }]}
        path = os.path.join(workdir, "oomd.json")
        write(path, json.dumps(config, indent=2))
        args = [tools["oomd"], "--config", path, "--interval", "1",
                "--runtime-dir", os.path.join(workdir, "oomd-run"),
                "--kmsg-override", os.path.join(workdir, "oomd-kmsg")]
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), \
            f"-i 1; memory_above {LINE // MiB}M or pressure_above memory 60 on kubepods; " \
            "kill_by_memory_size_or_growth on kubepods/*/*"
    if name == "nodewarden":
        manifests = os.path.join(workdir, "manifests")
        os.makedirs(manifests, exist_ok=True)
        for key, pod in scenario.pods.items():
            write(os.path.join(manifests, key.replace("/", "_") + ".json"),
                  json.dumps(pod["manifest"]))
        policy = os.path.join(workdir, "policy.json")
        write(policy, json.dumps({"evictionHard": {"allocatableMemory.available": "300Mi"},
                                  "housekeepingInterval": "1s"}))
        log = open(os.path.join(workdir, "agent.log"), "w")
        args = [scenario.nodewarden, "agent", "--source", "static", "--manifests", manifests,
                "--policy", policy, "--kubepods-cgroup", kube_rel, "--listen", "off",
                "--nodefs", "", "--log-format", "json", "--node", "peers"]
        proc = subprocess.Popen(args, stdout=log, stderr=log)
        for _ in range(300):  # ready: it logs its detectors after the first full cycle
            time.sleep(0.05)
            if '"event":"detectors"' in read(log.name):
                break
        return proc, "hard allocatableMemory.available < 300Mi, 1 s housekeeping"
    raise ValueError(name)


def trial(name, tools, rate, index):
    scenario = Scenario(tools["nodewarden"], rate, index)
    workdir = tempfile.mkdtemp(prefix="nwpeers-")
    contender = None
    try:
        scenario.add_pod("prod", "api", "burstable", 100000, {"memory": "256Mi"},
                         ["--start-mib", "200"])
        scenario.add_pod("batch", "one", "besteffort", 0, {}, ["--start-mib", "100"])
        scenario.add_pod("batch", "two", "besteffort", 0, {}, ["--start-mib", "100"])
        for _ in range(500):  # the idle pods' memory in place
            if scenario.usage() >= 395 * MiB:
                break
            time.sleep(0.01)
        contender, how = start_contender(name, scenario, tools, workdir)
        kills_before = scenario.oom_kills()
        scenario.add_pod("batch", "hog", "besteffort", 0, {},
                         ["--start-mib", "0", "--max-mib", "1100", "--grow-mib-per-s", str(rate)])
        crossed = peak_at = None
        peak = 0
        start = time.monotonic()
        quarter = three_quarters = None
        while time.monotonic() - start < 25:
            now = time.monotonic()
            usage = scenario.usage()
            if quarter is None and usage >= 500 * MiB:
                quarter = now
            if three_quarters is None and usage >= 650 * MiB:
                three_quarters = now
            if crossed is None and usage >= LINE:
                crossed = now
            if usage > peak:
                peak, peak_at = usage, now
            if scenario.procs["batch/hog"].poll() is not None:
                break
            if crossed is not None and now - peak_at > 3:
                break  # past the line and no longer growing: someone stopped the hog
            time.sleep(0.001)
        died = [pod for pod in scenario.pods if not scenario.alive(pod)]
        growth = (150 * MiB / (three_quarters - quarter) / MiB
                  if quarter and three_quarters and three_quarters > quarter else None)
        return {
            "contender": name, "config": how,
            "kernelOomKills": scenario.oom_kills() - kills_before,
            "crossed": crossed is not None,
            "stoppedMs": (peak_at - crossed) * 1000 if crossed is not None else None,
            "peakMiB": peak / MiB, "growthMiBs": growth, "died": died,
        }
    finally:
        if contender is not None and contender.poll() is None:
            contender.send_signal(signal.SIGTERM)
            try:
                contender.wait(timeout=5)
            except subprocess.TimeoutExpired:
                contender.kill()
                contender.wait()
        scenario.destroy()
        subprocess.run(["rm", "-rf", workdir])


def percentile(values, p):
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--rate", type=int, default=150, help="hog growth, MiB/s")
    parser.add_argument("--peers", default="build/peers/root/usr/bin",
                        help="where fetch-peers.sh unpacked earlyoom and oomd")
    parser.add_argument("--nodewarden", default="build/nodewarden")
    parser.add_argument("--contenders",
                        default="kernel,earlyoom-default,earlyoom-calibrated,oomd,nodewarden")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("run-peers: skipped: needs root")
        return 77
    if not os.path.exists(f"{ROOT}/cgroup.subtree_control") or \
            "memory" not in read(f"{ROOT}/cgroup.subtree_control"):
        print("run-peers: skipped: needs pure cgroup v2 with memory enabled at the root "
              "(run it in the VM lane: tests/vm/run-in-vm.sh)")
        return 77
    tools = {"earlyoom": os.path.abspath(os.path.join(args.peers, "earlyoom")),
             "oomd": os.path.abspath(os.path.join(args.peers, "oomd")),
             "nodewarden": os.path.abspath(args.nodewarden)}
    for tool, path in tools.items():
        if not os.access(path, os.X_OK):
            print(f"run-peers: {tool} not found at {path} (bench/peers/fetch-peers.sh)")
            return 1
    results = []
    print(f"kubepods 1 GiB, line at {LINE // MiB} MiB (300 MiB head room), hog at "
          f"{args.rate} MiB/s, {args.trials} trials each; kernel {os.uname().release}")
    print(f"{'contender':<20} {'trials':>6} {'kernel OOM':>10} {'crossing -> stopped ms':>28} "
          f"  who died")
    index = 0
    for name in args.contenders.split(","):
        rows = []
        for _ in range(args.trials):
            rows.append(trial(name, tools, args.rate, index))
            index += 1
        results.extend(rows)
        stopped = [r["stoppedMs"] for r in rows if r["stoppedMs"] is not None
                   and r["kernelOomKills"] == 0 and "batch/hog" in r["died"]]
        timing = (f"p50 {percentile(stopped, 50):.0f} p99 {percentile(stopped, 99):.0f} "
                  f"({min(stopped):.0f}-{max(stopped):.0f})" if stopped else "-")
        died = {}
        for r in rows:
            for pod in r["died"]:
                died[pod] = died.get(pod, 0) + 1
        print(f"{name:<20} {len(rows):>6} {sum(r['kernelOomKills'] for r in rows):>10} "
              f"{timing:>28}   " + ", ".join(f"{p} x{n}" for p, n in sorted(died.items())))
        print(f"  {rows[0]['config']}")
        sys.stdout.flush()
    if args.out:
        write(args.out, json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
