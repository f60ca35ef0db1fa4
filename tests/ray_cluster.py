"""A real Ray cluster on loopback for tests: a head and worker nodes, each its own `ray start` with
its own process group, working directory, Ray temp dir and environment (JACRL_ROOT = a project of
its own holding only the marker and the models, JACRL_RAY_SCRATCH = its own scratch), so no node
shares a file with another or with the driver.

Ray's token authentication is on, with the cluster's own token (`Cluster.auth`, which drivers
need in their environment). Lean for a 2-core machine: each node offers 1 CPU and one `mlx`, a
100 MB object store, no dashboard and no log monitor; a dead node is noticed within ~3 s. `stop`
ends every process of every node (SIGTERM to each node's process group, then SIGKILL) — never
`ray stop`, which would end every Ray process on the machine.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAY = str(Path(sys.executable).with_name("ray"))
OBJECT_STORE = 100 * 2**20
START_TRIES = 2  # `ray start` per node: a loaded machine can make a raylet miss Ray's 30 s window
GCS_WAIT_S = "120"  # how long a node waits for the GCS to start (Ray's default: 30 s)
FAST_DEATH = {  # the head's health checks: a node whose raylet died is declared dead in ~3 s
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_project(path: Path, models: tuple[str, ...] = ("jac-tiny",)) -> Path:
    """A project of its own for a node: the marker, the registry and copies of `models`."""
    (path / "models").mkdir(parents=True)
    shutil.copy(ROOT / "jacrl.toml", path)
    shutil.copy(ROOT / "models" / "registry.toml", path / "models")
    for m in models:
        shutil.copytree(ROOT / "models" / m, path / "models" / m)
    return path


def node_pids(pgid: int, marker: bytes) -> list[int]:
    """The live processes of a node: its process group, and every process started with `marker`
    in its environment (Ray's workers lead process groups of their own, and the cells'
    papermill and kernel processes inherit the node's environment)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
                env = (p / "environ").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()  # state ppid pgrp ...
            if fields[0] != "Z" and (int(fields[2]) == pgid or marker in env.split(b"\0")):
                out.append(int(p.name))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def pss_kb(pid: int) -> int:
    """Proportional set size: shared pages split among the processes that map them."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Node:
    name: str
    project: Path  # JACRL_ROOT and working directory of its processes
    scratch: Path  # JACRL_RAY_SCRATCH
    pgid: int  # its process group (the `ray start` that began it)
    log: Path
    start_s: float

    def pids(self) -> list[int]:
        return node_pids(self.pgid, f"JACRL_RAY_SCRATCH={self.scratch}".encode())

    def raylet_pid(self) -> int:
        (pid,) = [p for p in self.pids() if "/raylet/raylet " in cmdline(p)]
        return pid

    def pss_kb(self) -> int:
        return sum(pss_kb(p) for p in self.pids())


class Cluster:
    """`start_node(name, project, head=True)` first, then workers; `stop()` ends them all."""

    def __init__(self, env: dict[str, str] | None = None):
        self.env = dict(env or {})  # every node's, beside its own (e.g. a PYTHONPATH)
        self.port = free_port()
        # Ray's token authentication with a token of this cluster's own: no node or driver reads
        # or writes ~/.ray/auth_token (where a local `ray.init()` keeps one); drivers need `auth`
        self.auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        # Ray's temp dir holds unix sockets (107-byte path limit): a short path under /tmp
        self.temp = Path(tempfile.mkdtemp(prefix="jr", dir="/tmp"))
        self.nodes: dict[str, Node] = {}

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_node(
        self, name: str, project: Path, head: bool = False, timeout: float = 180
    ) -> Node:
        """`ray start` for one node, tried START_TRIES times: on a loaded machine a raylet can
        miss Ray's fixed 30 s window to register (`ray start` then exits 1); a failed try's
        processes are ended before the next (a head's on a fresh port)."""
        for attempt in range(1, START_TRIES + 1):
            node, rc = self._start_node(name, project, head, timeout)
            if rc == 0:
                return node
            self._end(node)
            if head:
                self.port = free_port()
            print(f"ray start ({name}) try {attempt} exited {rc}:\n{node.log.read_text()[-1500:]}")
        raise AssertionError(
            f"ray start ({name}) failed {START_TRIES} times:\n{node.log.read_text()[-3000:]}"
        )

    def _start_node(
        self, name: str, project: Path, head: bool, timeout: float
    ) -> tuple[Node, int | None]:
        args = [
            RAY,
            "start",
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            "1",
            "--resources",
            '{"mlx": 1}',
            "--temp-dir",
            str(self.temp / name),
            "--object-store-memory",
            str(OBJECT_STORE),
            "--include-log-monitor=false",
            "--disable-usage-stats",
        ]
        args += (
            ["--head", "--port", str(self.port), "--include-dashboard=false"]
            if head
            else ["--address", self.address]
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update(self.env)
        env.update(
            FAST_DEATH,
            **self.auth,
            JACRL_ROOT=str(project),
            JACRL_RAY_SCRATCH=str(project.parent / f"{name}-scratch"),
            RAY_USAGE_STATS_ENABLED="0",
            RAY_gcs_server_port_wait_time_s=GCS_WAIT_S,
        )
        log = self.temp / f"{name}.log"
        t0 = time.monotonic()
        with open(log, "w") as out:
            proc = subprocess.Popen(
                args,
                cwd=project,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        node = Node(name, project, Path(env["JACRL_RAY_SCRATCH"]), proc.pid, log, 0.0)
        self.nodes[name] = node  # stopped even when its start fails
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        node.start_s = round(time.monotonic() - t0, 2)
        return node, rc

    def _end(self, node: Node) -> None:
        """SIGKILL every process of one node and wait until they are gone."""
        deadline = time.monotonic() + 10
        while (pids := node.pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)

    def kill_raylet(self, name: str) -> int:
        """SIGKILL the node's raylet (the node dies; its workers follow). Returns its pid."""
        pid = self.nodes[name].raylet_pid()
        os.kill(pid, signal.SIGKILL)
        return pid

    def pss_kb(self) -> int:
        return sum(n.pss_kb() for n in self.nodes.values())

    def _signal(self, sig: int) -> None:
        for node in self.nodes.values():
            for pid in node.pids():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass

    def stop(self, grace: float = 1) -> list[int]:
        """End every process of every node (SIGTERM, then after `grace` s SIGKILL: the GCS and
        the autoscaler monitor ignore SIGTERM for longer); returns those still alive after."""
        self._signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(n.pids() for n in self.nodes.values()):
            time.sleep(0.2)
        self._signal(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(n.pids() for n in self.nodes.values()):
            time.sleep(0.2)
        shutil.rmtree(self.temp, ignore_errors=True)
        return [p for n in self.nodes.values() for p in n.pids()]
