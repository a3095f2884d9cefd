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
  systemd-oomd        systemd-oomd 252 (only when PID 1 is systemd: run-in-vm.sh --systemd),
                      as documented: kubepods is the systemd slice kubepods.slice
                      (MemoryMax=1G, ManagedOOMMemoryPressure=kill,
                      ManagedOOMMemoryPressureLimit=1%), the pods are slices and scopes below it
                      as the kubelet's systemd cgroup driver makes them, and systemd-oomd runs
                      with DefaultMemoryPressureDurationSec=1s (the shortest it accepts)
  systemd-oomd-memoryhigh
                      the same plus MemoryHigh=724M on kubepods.slice: the line turned by hand
                      into pressure (the kernel throttles the slice there), for systemd-oomd to
                      see; not what its documentation asks, the best it can do for this job

Without systemd as PID 1 the systemd-oomd rows are reported as skipped, with the reason.
Every contender but systemd-oomd gets kubepods as a plain cgroup made here (cgroupfs);
systemd-oomd only watches units, so its kubepods is the slice (same limit, pods, sizes).
Measured from outside every contender: a sampler reads kubepods' memory.current about every
millisecond; "crossing" is the first sample at or past the line, "stopped" the sample where
usage peaked (the hog stopped growing); a second figure counts from the working set's
crossing (usage minus memory.stat's inactive_file, read every 20 ms, at the line: the
kubelet's and nodewarden's measure, later than usage's by the page cache); kernel OOM kills
are the change of kubepods' memory.events oom_kill; "died" lists the pods whose processes
are gone 3 s after the hog stopped (or after the trial's 25 s). kubepods' memory.pressure
"full avg10" is sampled too (its peak is printed): it is what systemd-oomd compares with its
limit.
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
        self.kube_rel = f"{self.top}/kubepods"
        self.kubepods = f"{self.path}/kubepods"
        self.procs = {}
        self.pods = {}
        self.nodewarden = nodewarden
        self.rate = rate
        # Under systemd as PID 1 the root may lack some of them (systemd enables only what its
        # units use): enable them there first.
        try:
            write(f"{ROOT}/cgroup.subtree_control", CONTROLLERS)
        except OSError:
            pass
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
        self.record_pod(ns, name, uid, priority, requests, cgroup)

        def enter():
            write(f"{cgroup}/cgroup.procs", str(os.getpid()))

        self.procs[f"{ns}/{name}"] = subprocess.Popen(
            [self.nodewarden, "demo-load", "--lifetime", "60"] + load_args,
            preexec_fn=enter, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def record_pod(self, ns, name, uid, priority, requests, cgroup):
        """The pod's cgroup and its manifest (for nodewarden's static source)."""
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

    def kill_procs(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def usage(self):
        return int(read(f"{self.kubepods}/memory.current"))

    def oom_kills(self):
        return keyed(f"{self.kubepods}/memory.events", "oom_kill")

    def inactive_file(self):
        """kubepods' inactive file pages: usage minus these is the working set, the figure of
        the kubelet's memory signals (and of nodewarden's line)."""
        try:
            return keyed(f"{self.kubepods}/memory.stat", "inactive_file")
        except (OSError, ValueError):
            return 0

    def alive(self, pod):
        return read(f"{self.pods[pod]['cgroup']}/cgroup.procs").strip() != ""

    def full_avg10(self):
        """kubepods' memory.pressure "full avg10" (%): what systemd-oomd compares."""
        try:
            for line in read(f"{self.kubepods}/memory.pressure").splitlines():
                if line.startswith("full "):
                    return float(line.split()[1].split("=")[1])
        except (OSError, IndexError, ValueError):
            pass
        return 0.0

    def ready(self):
        """Waits (up to 20 s) until the idle pods' memory is in place."""
        for _ in range(2000):
            if self.usage() >= 395 * MiB:
                return
            time.sleep(0.01)

    def destroy(self):
        self.kill_procs()
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


def systemctl(*args, check=True, timeout=60):
    return subprocess.run(["systemctl", *args], check=check, timeout=timeout, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout


def pid1_is_systemd():
    try:
        return read("/proc/1/comm").strip() == "systemd"
    except OSError:
        return False


# systemd-oomd's memory pressure limit on kubepods.slice (see README.md for the choice).
OOMD_PRESSURE_LIMIT = "1%"
OOMD_CONF_DIR = "/run/systemd/oomd.conf.d"


class SystemdScenario(Scenario):
    """The same trial with kubepods as systemd units, as the kubelet's systemd cgroup driver
    lays them out: kubepods.slice (the limit, and what systemd-oomd monitors), a slice per QoS
    tier, a slice per pod and, in it, the pod's process as a transient scope (a container).
    systemd-oomd's candidates are leaf cgroups below the monitored one: the pods' scopes."""

    SLICE = "kubepods.slice"

    def __init__(self, nodewarden, rate, index, memory_high=None):
        self.top = self.SLICE
        self.kube_rel = self.SLICE
        self.path = self.kubepods = f"{ROOT}/{self.SLICE}"
        self.procs = {}
        self.pods = {}
        self.units = []
        self.nodewarden = nodewarden
        self.rate = rate
        self.index = index
        if os.path.exists(self.kubepods):
            raise RuntimeError(f"{self.kubepods} exists already (a kubelet on this host?)")
        # Runtime drop-ins (/run/systemd/system.control): gone at reboot, no daemon-reload.
        systemctl("set-property", "--runtime", self.SLICE, "MemoryAccounting=yes",
                  f"MemoryMax={LIMIT}", "MemorySwapMax=0",
                  f"MemoryHigh={memory_high if memory_high else 'infinity'}",
                  "ManagedOOMMemoryPressure=kill",
                  f"ManagedOOMMemoryPressureLimit={OOMD_PRESSURE_LIMIT}")
        systemctl("start", self.SLICE)

    def add_pod(self, ns, name, tier, priority, requests, load_args):
        uid = str(uuid.uuid4())
        pod_slice = f"kubepods-{tier}-pod{uid.replace('-', '_')}.slice"
        scope = f"nwpeers-{self.index}-{ns}-{name}.scope"
        self.units.append(scope)
        self.record_pod(ns, name, uid, priority, requests,
                        f"{self.kubepods}/kubepods-{tier}.slice/{pod_slice}")
        # systemd-run --scope registers the scope with this process in it, then execs the
        # command: the Popen's process is the pod's.
        self.procs[f"{ns}/{name}"] = subprocess.Popen(
            ["systemd-run", "--scope", "--quiet", "--collect", f"--unit={scope}",
             f"--slice={pod_slice}", "-p", "MemoryAccounting=yes", "--",
             self.nodewarden, "demo-load", "--lifetime", "60"] + load_args,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def usage(self):
        try:
            return int(read(f"{self.kubepods}/memory.current"))
        except FileNotFoundError:
            return 0

    def alive(self, pod):
        for dirpath, _, _ in os.walk(self.pods[pod]["cgroup"]):
            try:
                if read(f"{dirpath}/cgroup.procs").strip():
                    return True
            except OSError:
                pass
        return False

    def destroy(self):
        self.kill_procs()
        systemctl("stop", self.SLICE, check=False)
        systemctl("reset-failed", *self.units, check=False)
        for _ in range(500):
            if not os.path.exists(self.kubepods):
                return
            time.sleep(0.01)


class OomdUnit:
    """systemd-oomd as the transient unit systemd-oomd.service: PID 1 hands the ManagedOOM
    cgroups (io.systemd.ManagedOOM) only to a client in the unit of that name. Quacks like the
    Popen objects of the other contenders (poll, send_signal, wait, kill)."""

    NAME = "systemd-oomd.service"

    def __init__(self, binary, log):
        # The packaged unit's resource settings (MemoryMin/Low 64M, OOMScoreAdjust=-900), its
        # binary from the unpacked package, run as root (no systemd-oom user here), logging
        # at debug level into a file.
        systemctl("reset-failed", self.NAME, check=False)
        subprocess.run(
            ["systemd-run", "--quiet", "--collect", f"--unit={self.NAME}",
             "--service-type=notify", "-p", "MemoryMin=64M", "-p", "MemoryLow=64M",
             "-p", "OOMScoreAdjust=-900", "-p", f"StandardOutput=file:{log}",
             "-p", f"StandardError=file:{log}", "-E", "SYSTEMD_LOG_LEVEL=debug",
             "-E", "SYSTEMD_LOG_TARGET=console", "-E", "SYSTEMD_LOG_TIME=1", binary],
            check=True, timeout=60)

    def poll(self):
        state = systemctl("is-active", self.NAME, check=False).strip()
        return None if state in ("active", "activating", "deactivating", "reloading") else 0

    def send_signal(self, _sig):
        systemctl("stop", "--no-block", self.NAME, check=False)

    def wait(self, timeout=None):
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.NAME, timeout)
            time.sleep(0.05)
        return 0

    def kill(self):
        systemctl("kill", "-s", "KILL", self.NAME, check=False)


def start_systemd_oomd(tools, workdir):
    """systemd-oomd from the unpacked package with its configuration as a drop-in in /run.
    Returns once it has the slice from PID 1."""
    os.makedirs(OOMD_CONF_DIR, exist_ok=True)
    write(f"{OOMD_CONF_DIR}/50-nwpeers.conf", "[OOM]\nDefaultMemoryPressureDurationSec=1s\n")
    # Its varlink socket's directory (systemd-oomd.socket would make it).
    os.makedirs("/run/systemd/oom", exist_ok=True)
    log = os.path.join(workdir, "systemd-oomd.log")
    write(log, "")
    return OomdUnit(tools["systemd-oomd"], log), log


def mem_available():
    return keyed("/proc/meminfo", "MemAvailable:") * 1024


def start_contender(name, scenario, tools, workdir):
    """Starts the contender; returns (Popen or None, how it was configured)."""
    kube_rel = scenario.kube_rel
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
    if name.startswith("nodewarden"):
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
        if name == "nodewarden-memoryhigh":
            args.append("--memory-high-edge")
        if name == "nodewarden-shipped":  # as the unit and the DaemonSet run it
            args += ["--nice", "-20", "--realtime", "1"]
        proc = subprocess.Popen(args, stdout=log, stderr=log)
        for _ in range(300):  # ready: it logs its detectors after the first full cycle
            time.sleep(0.05)
            if '"event":"detectors"' in read(log.name):
                break
        return proc, "hard allocatableMemory.available < 300Mi, 1 s housekeeping" + \
            {"nodewarden-memoryhigh": "; --memory-high-edge (kubepods memory.high at the line)",
             "nodewarden-shipped": "; --nice -20 --realtime 1, as the unit and the DaemonSet"
             }.get(name, "")
    if name.startswith("systemd-oomd"):
        proc, log = start_systemd_oomd(tools, workdir)
        # Ready (Type=notify) and, then, once it has the slice from PID 1.
        for _ in range(200):
            if "kubepods.slice" in read(log) or proc.poll() is not None:
                break
            time.sleep(0.05)
        how = (f"kubepods.slice MemoryMax=1G ManagedOOMMemoryPressure=kill "
               f"ManagedOOMMemoryPressureLimit={OOMD_PRESSURE_LIMIT}"
               + (f" MemoryHigh={LINE // MiB}M" if name == "systemd-oomd-memoryhigh" else "")
               + "; oomd.conf DefaultMemoryPressureDurationSec=1s")
        return proc, how
    raise ValueError(name)


def trial(name, tools, rate, index):
    if name.startswith("systemd-oomd"):
        scenario = SystemdScenario(tools["nodewarden"], rate, index,
                                   memory_high=LINE if name == "systemd-oomd-memoryhigh" else None)
    else:
        scenario = Scenario(tools["nodewarden"], rate, index)
    workdir = tempfile.mkdtemp(prefix="nwpeers-")
    contender = None
    # The same page cache at every start: the pods' executable pages are then charged to the
    # pods that fault them in (to kubepods), not to an earlier trial's (gone) cgroup. Without
    # this, kubepods holds no file pages, reclaim in it scans nothing, and systemd-oomd, which
    # acts only "with reclaim activity" (pgscan rising), never acts however high the pressure.
    os.sync()
    write("/proc/sys/vm/drop_caches", "3")
    try:
        scenario.add_pod("prod", "api", "burstable", 100000, {"memory": "256Mi"},
                         ["--start-mib", "200"])
        scenario.add_pod("batch", "one", "besteffort", 0, {}, ["--start-mib", "100"])
        scenario.add_pod("batch", "two", "besteffort", 0, {}, ["--start-mib", "100"])
        scenario.ready()
        contender, how = start_contender(name, scenario, tools, workdir)
        kills_before = scenario.oom_kills()
        scenario.add_pod("batch", "hog", "besteffort", 0, {},
                         ["--start-mib", "0", "--max-mib", "1100", "--grow-mib-per-s", str(rate)])
        crossed = peak_at = crossed_ws = None
        peak = 0
        inactive, inactive_read = 0, 0.0
        start = time.monotonic()
        quarter = three_quarters = None
        full_max, full_read = 0.0, 0.0
        while time.monotonic() - start < 25:
            now = time.monotonic()
            if now - full_read >= 0.1:
                full_max, full_read = max(full_max, scenario.full_avg10()), now
            usage = scenario.usage()
            if quarter is None and usage >= 500 * MiB:
                quarter = now
            if three_quarters is None and usage >= 650 * MiB:
                three_quarters = now
            if crossed is None and usage >= LINE:
                crossed = now
            if crossed is not None and crossed_ws is None:
                if now - inactive_read >= 0.02:
                    inactive, inactive_read = scenario.inactive_file(), now
                if usage - inactive >= LINE:
                    crossed_ws = now
            if usage > peak:
                peak, peak_at = usage, now
            if scenario.procs["batch/hog"].poll() is not None:
                break
            if crossed is not None and now - peak_at > 3:
                break  # past the line and no longer growing: someone stopped the hog
            time.sleep(0.001)
        # 3 s more, for what happens after the hog is stopped (a late second kill: systemd-oomd
        # reads a 10 s average of pressure, which outlives the event that raised it).
        linger = time.monotonic() + 3
        while time.monotonic() < linger:
            full_max = max(full_max, scenario.full_avg10())
            time.sleep(0.1)
        died = [pod for pod in scenario.pods if not scenario.alive(pod)]
        said, candidates = [], []
        oomd_log = os.path.join(workdir, "systemd-oomd.log")
        if os.path.exists(oomd_log) and LOG_DIR:
            os.makedirs(LOG_DIR, exist_ok=True)
            subprocess.run(["cp", oomd_log, os.path.join(LOG_DIR, f"trial-{index}-{name}.log")])
        if os.path.exists(oomd_log):  # its kills, and the candidates it weighed (multi-line)
            listing = False
            for line in read(oomd_log).splitlines():
                if "Killed " in line:
                    said.append(line)
                if "top candidates" in line:
                    listing = True
                elif listing and line[:1].isspace():
                    candidates.append(line.strip())
                else:
                    listing = False
        agent_log = os.path.join(workdir, "agent.log")
        if name.startswith("nodewarden") and LOG_DIR and os.path.exists(agent_log):
            os.makedirs(LOG_DIR, exist_ok=True)
            subprocess.run(["cp", agent_log, os.path.join(LOG_DIR, f"trial-{index}-{name}.log")])
        agent_ms = []  # nodewarden's own crossing -> signalled, from its "evict" log lines
        agent_log = os.path.join(workdir, "agent.log")
        if name.startswith("nodewarden") and os.path.exists(agent_log):
            for line in read(agent_log).splitlines():
                if '"event":"evict"' in line:
                    try:
                        agent_ms.append(float(json.loads(line).get("latency_ms", 0)))
                    except ValueError:
                        pass
        growth = (150 * MiB / (three_quarters - quarter) / MiB
                  if quarter and three_quarters and three_quarters > quarter else None)
        if contender is not None and name.startswith("systemd-oomd") and \
                os.environ.get("NWPEERS_DEBUG") == "1":
            print("\n".join(line for line in read(os.path.join(workdir, "systemd-oomd.log"))
                            .splitlines() if "varlink" not in line and "Bus " not in line)[-8000:])
        return {
            "contender": name, "config": how,
            "kernelOomKills": scenario.oom_kills() - kills_before,
            "crossed": crossed is not None,
            "stoppedMs": (peak_at - crossed) * 1000 if crossed is not None else None,
            # From the working set's crossing (usage - inactive_file at the line), later than
            # usage's by the page cache; None when the working set never reached the line.
            "stoppedWsMs": (peak_at - crossed_ws) * 1000 if crossed_ws is not None else None,
            "peakMiB": peak / MiB, "growthMiBs": growth, "died": died,
            "fullAvg10MaxPct": full_max, "contenderSaid": said, "candidates": candidates,
            "agentMs": agent_ms,
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
        if name.startswith("systemd-oomd"):
            subprocess.run(["rm", "-f", f"{OOMD_CONF_DIR}/50-nwpeers.conf"])


LOG_DIR = None  # with --out: the contenders' logs go to OUT.logs/


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
    parser.add_argument("--systemd-oomd", default="build/peers/root/lib/systemd/systemd-oomd",
                        help="where fetch-peers.sh unpacked systemd-oomd")
    parser.add_argument("--nodewarden", default="build/nodewarden")
    parser.add_argument("--contenders",
                        default="kernel,earlyoom-default,earlyoom-calibrated,oomd,nodewarden,"
                                "systemd-oomd,systemd-oomd-memoryhigh")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    global LOG_DIR
    if args.out:
        LOG_DIR = args.out + ".logs"
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
             "nodewarden": os.path.abspath(args.nodewarden),
             "systemd-oomd": os.path.abspath(args.systemd_oomd)}
    contenders = args.contenders.split(",")
    known = ("kernel", "earlyoom-default", "earlyoom-calibrated", "oomd", "nodewarden",
             "nodewarden-memoryhigh", "nodewarden-shipped", "systemd-oomd",
             "systemd-oomd-memoryhigh")
    for name in contenders:
        if name not in known:
            print(f"run-peers: unknown contender {name} (known: {', '.join(known)})")
            return 2
    skipped = {}
    if not pid1_is_systemd():
        for name in contenders:
            if name.startswith("systemd-oomd"):
                skipped[name] = ("PID 1 is not systemd: systemd-oomd acts only on units that "
                                 "PID 1 reports (run in tests/vm/run-in-vm.sh --systemd)")
    for tool, path in tools.items():
        if tool == "systemd-oomd" and (all(n in skipped for n in contenders
                                           if n.startswith("systemd-oomd"))):
            continue
        if not os.access(path, os.X_OK):
            print(f"run-peers: {tool} not found at {path} (bench/peers/fetch-peers.sh)")
            return 1
    results = []
    print(f"kubepods 1 GiB, line at {LINE // MiB} MiB (300 MiB head room), hog at "
          f"{args.rate} MiB/s, {args.trials} trials each; kernel {os.uname().release}; "
          f"PID 1 {read('/proc/1/comm').strip()}")
    print(f"{'contender':<20} {'trials':>6} {'kernel OOM':>10} {'crossing -> stopped ms':>28} "
          f"  who died")
    index = 0
    for name in contenders:
        if name in skipped:
            results.append({"contender": name, "skipped": skipped[name]})
            print(f"{name:<20} skipped: {skipped[name]}")
            sys.stdout.flush()
            continue
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
        ws = [max(0.0, r["stoppedWsMs"]) for r in rows if r["stoppedWsMs"] is not None
              and r["kernelOomKills"] == 0 and "batch/hog" in r["died"]]
        print(f"  from the working set's crossing (usage - inactive_file): "
              + (f"p50 {percentile(ws, 50):.0f} p99 {percentile(ws, 99):.0f} "
                 f"({min(ws):.0f}-{max(ws):.0f}) ms, {len(ws)} of {len(rows)} reached it"
                 if ws else "never reached"))
        own = [r["agentMs"][0] for r in rows if r.get("agentMs")]
        if own:
            print(f"  its own crossing -> signalled (log latency_ms): "
                  f"p50 {percentile(own, 50):.1f} "
                  f"p99 {percentile(own, 99):.1f} ({min(own):.1f}-{max(own):.1f}) ms")
        print(f"  {rows[0]['config']}; kubepods memory full avg10 at most "
              + " ".join(f"{r['fullAvg10MaxPct']:.2f}%" for r in rows))
        for r in rows:
            for line in r["contenderSaid"]:
                print(f"  said: {line}")
        sys.stdout.flush()
    if args.out:
        write(args.out, json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
