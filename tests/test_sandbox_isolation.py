"""Nothing writable or reachable is shared between two jobs of one server, proven generally: a job
walks the whole file tree it sees, writes a marker in every directory it can, listens on an
abstract unix socket and on loopback TCP ports; a second job of the same server (after it, and
while it still runs) walks the tree again looking for any marker and tries to connect to each
socket. It finds none, and the only directories a job can write to are its own private tmpfs."""

from __future__ import annotations

import base64
import json

import pytest

from jacrl.executor import Executor

PORTS = (80, 8080, 47011)  # loopback TCP ports the first job listens on, where it can
PRIVATE = ("/tmp", "/var/tmp")  # the job's own tmpfs (its cwd is under /tmp)

# Plain Python, run by `exec` from a Jac program. mode "write": leave markers everywhere, hold them
# for `hold` seconds; mode "look": report every marker, socket and port it can reach. Both report
# the mount points (device changes along the walk) and the writable directories they saw.
PROBE = r"""
import json, os, socket, time
MARK = "jacrl-marker-" + TOKEN
def walk():
    seen, stack = [], ["/"]
    while stack:
        d = stack.pop()
        seen.append(d)
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
            except OSError:
                pass
    return seen
dirs = walk()
devs, mounts, writable, found, reached = {}, [], [], [], []
for d in dirs:
    try:
        dev = os.stat(d).st_dev
    except OSError:
        continue
    if devs.get(os.path.dirname(d)) != dev:
        mounts.append(d)
    devs[d] = dev
    if MODE == "write":
        try:
            with open(os.path.join(d, MARK), "w") as fh:
                fh.write("x")
            writable.append(d)
        except OSError:
            pass
    else:
        try:
            if any(n.startswith("jacrl-marker-") for n in os.listdir(d)):
                found.append(d)
        except OSError:
            pass
        if os.access(d, os.W_OK):
            writable.append(d)
held, listening = [], []  # the sockets stay open (listening) until the job ends
addrs = [(socket.AF_UNIX, "\0" + MARK)] + [(socket.AF_INET, ("127.0.0.1", p)) for p in PORTS]
for fam, addr in addrs:
    try:  # the policy allows unix sockets only: socket() of AF_INET itself is refused
        s = socket.socket(fam, socket.SOCK_STREAM)
        if MODE == "write":
            s.bind(addr); s.listen(); held.append(s); listening.append(repr(addr))
        else:
            s.settimeout(0.5); s.connect(addr); reached.append(repr(addr))
    except OSError:
        pass
print(json.dumps(dict(mounts=mounts, writable=writable, found=found, reached=reached,
                      listening=listening, dirs=len(dirs))), flush=True)
time.sleep(HOLD)
"""


def program(mode: str, token: str, hold: float = 0.0, wait: float = 0.0) -> str:
    code = (
        f"MODE, TOKEN, HOLD, PORTS = {mode!r}, {token!r}, {hold!r}, {PORTS!r}\n"
        f"import time; time.sleep({wait!r})\n" + PROBE
    )
    b64 = base64.b64encode(code.encode()).decode()
    return f'with entry {{ exec(__import__("base64").b64decode("{b64}").decode()); }}'


def report(verdict) -> dict:
    assert verdict.ran, verdict
    return json.loads(verdict.stdout.splitlines()[-1])


def private(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PRIVATE)


@pytest.fixture(scope="module")
def ex():
    with Executor(concurrency=2) as e:
        if e.isolation != "sandbox":
            pytest.skip(f"no sandbox here ({e.isolation})")
        yield e


def test_a_job_can_write_only_its_own_tmpfs(ex):
    """Everything a job can write to is its own private /tmp or /var/tmp (/dev, /proc and every
    bound directory are read-only), and it did write its markers there."""
    w = report(ex.run_many([program("write", "solo")], timeout=20)[0])
    assert w["dirs"] > 500 and "/dev" in w["mounts"] and "/tmp" in w["mounts"], w["mounts"]
    assert {"/tmp", "/var/tmp"} <= set(w["writable"]), w["writable"]
    assert all(private(d) for d in w["writable"]), [d for d in w["writable"] if not private(d)]
    assert repr("\0jacrl-marker-solo") in w["listening"], w  # its own namespace lets it listen


def test_a_second_job_finds_nothing_of_the_first_after_it(ex):
    (first,) = ex.run_many([program("write", "seq")], timeout=20)
    (look,) = ex.run_many([program("look", "seq")], timeout=20)
    w, r = report(first), report(look)
    assert w["writable"], w
    assert r["found"] == [] and r["reached"] == [], r


def test_a_second_job_finds_nothing_of_the_first_while_it_runs(ex):
    """Concurrent: the first job holds its markers and listening sockets for 4 s; the second looks
    after 1.5 s, while the first still runs."""
    first, look = ex.run_many(
        [program("write", "conc", hold=4.0), program("look", "conc", wait=1.5)], timeout=20
    )
    w, r = report(first), report(look)
    assert w["writable"] and w["listening"], w
    assert look.seconds < first.seconds, (look.seconds, first.seconds)  # it looked meanwhile
    assert r["found"] == [] and r["reached"] == [], r
