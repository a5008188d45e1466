"""A private single-node SLURM cluster for tests: MUNGE with a generated key, slurmctld and slurmd with
a generated slurm.conf, all in one temporary folder, on localhost, on free ports, without accounting.

    with SlurmCluster(partitions=("cc_cpu", "cc_gpu")) as cluster:
        subprocess.run(["sbatch", "--wrap", "true"], env=cluster.env(), check=True)

The cluster shares nothing with a system SLURM or MUNGE installation (own key, own socket, own ports,
own state and spool folders, ``SLURM_CONF`` pointing at its own slurm.conf), so several test sessions
can run side by side. The daemons run as root (slurmd must, to start jobs); :meth:`stop` (also called
by ``__exit__`` and on a failed start) stops exactly the processes it started and removes the folder.

The node has one *fake* GPU (a GRES whose device file is an empty regular file), so that a job asking
for a GPU can be scheduled and its routing to the GPU partition observed; no job uses a real device.
The daemons get SIGTERM if the test process dies without stopping them (Linux PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "sinfo", "srun", "scancel")
PR_SET_PDEATHSIG = 1
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/local/sbin"])


def which(name: str) -> str | None:
    return shutil.which(name, path=SEARCH_PATH)


def unavailable_reason() -> str | None:
    """Why a private cluster cannot be started here (None when it can)."""
    missing = [name for name in DAEMONS + CLIENTS if which(name) is None]
    if missing:
        return (f"SLURM/MUNGE binaries missing ({', '.join(missing)}); "
                "install them with .ci/slurm-setup.sh (Debian: slurmctld slurmd slurm-client munge)")
    if os.geteuid() != 0:
        return "a private SLURM cluster needs root (slurmd starts jobs as their user)"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SlurmClusterError(RuntimeError):
    pass


class SlurmCluster:
    """Start with :meth:`start` (or ``with``); stop with :meth:`stop`."""

    def __init__(self, partitions: tuple[str, str] = ("cpu", "gpu"), cpus: int | None = None,
                 memory_mb: int = 64000, min_job_age: int = 3600) -> None:
        self.cpu_partition, self.gpu_partition = partitions
        self.cpus = cpus or max(2, os.cpu_count() or 2)
        self.memory_mb = memory_mb
        self.min_job_age = min_job_age
        self.node = "ccnode"
        self.root: Path | None = None
        self.processes: dict[str, subprocess.Popen] = {}  # daemon -> its (foreground) process

    # ------------------------------------------------------------------ paths and environment

    @property
    def conf(self) -> Path:
        assert self.root is not None
        return self.root / "etc" / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        assert self.root is not None
        return self.root / "munge" / "munge.socket"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment whose SLURM commands talk to this cluster (and jobs inherit that)."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        for key in [k for k in env if k.startswith(("SLURM_JOB", "SBATCH_", "SRUN_", "SALLOC_"))]:
            env.pop(key)
        env["PATH"] = os.pathsep.join([str(self.root / "bin"), env.get("PATH", "")]).strip(os.pathsep)
        return env

    def log_tail(self, lines: int = 40) -> str:
        """The end of every daemon log (for failure messages)."""
        if self.root is None:
            return ""
        parts = []
        for log in sorted((self.root / "log").glob("*")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"== {log.name}\n" + "\n".join(text))
        return "\n".join(parts)

    # ------------------------------------------------------------------ configuration

    def _write_config(self) -> None:
        root = self.root
        assert root is not None
        for sub in ("etc", "munge", "log", "run", "state", "spool", "bin"):
            (root / sub).mkdir(mode=0o700)
        # Client wrappers that name this cluster's slurm.conf: the Snakemake job step (slurm-jobstep)
        # drops SLURM_* variables, SLURM_CONF included, before it calls srun inside a job, and there is
        # no /etc/slurm/slurm.conf for this private cluster (a real cluster has one on every node).
        for client in CLIENTS:
            wrapper = root / "bin" / client
            wrapper.write_text(f'#!/bin/sh\nSLURM_CONF={self.conf} exec {which(client)} "$@"\n')
            wrapper.chmod(0o700)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        host = socket.gethostname().split(".")[0]
        conf = f"""\
# Generated by tests/helpers/slurm_cluster.py: a private single-node cluster without accounting.
ClusterName=cctest{os.getpid()}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={root / 'state'}
SlurmdSpoolDir={root / 'spool'}
SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}
SlurmdPidFile={root / 'run' / 'slurmd.pid'}
SlurmctldLogFile={root / 'log' / 'slurmctld.log'}
SlurmdLogFile={root / 'log' / 'slurmd.log'}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge={self.min_job_age}
KillWait=5
InactiveLimit=0
GresTypes=gpu
NodeName={self.node} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={self.cpus} RealMemory={self.memory_mb} Gres=gpu:1 State=UNKNOWN
PartitionName={self.cpu_partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
PartitionName={self.gpu_partition} Nodes={self.node} MaxTime=INFINITE State=UP
"""
        self.conf.write_text(conf)
        # SLURM drops a GPU without a device file; an empty regular file stands in for /dev/nvidia0
        (root / "dev").mkdir(mode=0o700)
        (root / "dev" / "nvidia0").touch()
        (root / "etc" / "gres.conf").write_text(f"NodeName={self.node} Name=gpu File={root / 'dev' / 'nvidia0'}\n")

    # ------------------------------------------------------------------ start and stop

    def _daemon(self, name: str, args: list[str], ready, what: str) -> None:
        """Start one daemon in the foreground as a child process and wait until ``ready()``."""
        assert self.root is not None
        with (self.root / "log" / f"{name}.out").open("ab") as out:
            process = subprocess.Popen([which(name), *args], stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, env=self.env(), start_new_session=True,
                                       preexec_fn=_die_with_parent)
        self.processes[name] = process
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise SlurmClusterError(f"{name} exited with {process.returncode} at start\n{self.log_tail()}")
            if ready():
                return
            time.sleep(0.2)
        raise SlurmClusterError(f"{name} started but never {what}\n{self.log_tail()}")

    def _command(self, name: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([which(name), *args], capture_output=True, text=True, env=self.env(), timeout=timeout)

    def start(self) -> "SlurmCluster":
        reason = unavailable_reason()
        if reason:
            raise SlurmClusterError(reason)
        # a short path: the MUNGE socket path must fit a sockaddr_un (108 bytes)
        self.root = Path(tempfile.mkdtemp(prefix="ccslurm-", dir="/tmp"))
        try:
            self._write_config()
            munge = self.root / "munge"
            self._daemon("munged", ["--foreground", f"--socket={self.munge_socket}", f"--key-file={munge / 'munge.key'}",
                                    f"--pid-file={self.root / 'run' / 'munged.pid'}",
                                    f"--log-file={self.root / 'log' / 'munged.log'}",
                                    f"--seed-file={munge / 'munge.seed'}", "--force"],
                         self.munge_socket.exists, "opened its socket")
            self._daemon("slurmctld", ["-D", "-i", "-f", str(self.conf)],
                         lambda: self._command("scontrol", "ping", timeout=20).stdout.count("UP") > 0,
                         "answered scontrol ping")
            self._daemon("slurmd", ["-D", "-f", str(self.conf), "-N", self.node], self._node_ready,
                         "registered its node as idle")
        except BaseException:
            self.stop()
            raise
        return self

    def _node_ready(self) -> bool:
        done = self._command("sinfo", "-h", "-n", self.node, "-o", "%T", timeout=20)
        states = done.stdout.split()
        return done.returncode == 0 and bool(states) and all(s.rstrip("*~#") in ("idle", "mixed", "allocated")
                                                                for s in states)

    def cancel_all(self, timeout: float = 60) -> None:
        """Cancel every job of this cluster and wait until none is running (job steps end with them)."""
        if "slurmctld" not in self.processes:
            return
        active = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                live = [job["id"] for job in self.jobs() if job["state"] in active]
            except (subprocess.SubprocessError, OSError):
                return
            if not live:
                return
            self._command("scancel", *live, timeout=30)
            time.sleep(1)

    def stop(self) -> None:
        """Cancel the jobs, stop the daemons this object started (slurmd first), remove the folder."""
        try:
            self.cancel_all()
        finally:
            for name in ("slurmd", "slurmctld", "munged"):
                process = self.processes.pop(name, None)
                if process is not None:
                    _terminate(process)
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)
                self.root = None

    def __enter__(self) -> "SlurmCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ queries

    def jobs(self) -> list[dict[str, str]]:
        """Every job this cluster knows (running, and finished within MinJobAge): id, name, partition,
        account, state, comment (the Snakemake plugin writes rule_<rule>[_wildcards_<...>] there) and the GPUs
        asked for (tres_per_job/tres_per_node, e.g. gres:gpu:1; N/A when none)."""
        fields = ("JobID", "Name", "Partition", "Account", "State", "Comment", "tres-per-job", "tres-per-node")
        keys = ("id", "name", "partition", "account", "state", "comment", "tres_per_job", "tres_per_node")
        done = self._command("squeue", "--states=all", "--noheader", "-O", ",".join(f"{f}:512|" for f in fields))
        if done.returncode != 0:
            raise SlurmClusterError(f"squeue failed: {done.stderr.strip()}")
        return [dict(zip(keys, (part.strip() for part in line.split("|"))))
                for line in done.stdout.splitlines() if line.strip()]


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the test process dies, however it dies (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: stop() still runs in the fixture's finalizer
        pass


def _terminate(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM one child process, wait for it, SIGKILL it if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)
