"""Where the fork server runs: inside a bubblewrap sandbox, so model-written code sees the
interpreter and nothing else of the machine.

The sandbox (bubblewrap, Debian `bubblewrap`; it uses the kernel's user namespaces, so it works as
root and as a normal user) shows read-only: /usr (and the /bin, /lib… links), the dynamic linker's
cache and the time zone, the interpreter's prefix, the venv and its site-packages (wherever they
live), the server script and jaclang's own compiled compiler (`jac_cache.py`); writable: only
fresh tmpfs (/tmp, /var/tmp); /dev is read-only with only the device nodes (`minimal_dev`). No
project tree, no home directory, no other process (own pid
namespace), no network (own net namespace), an empty environment, no capabilities. As root the
sandbox runs as SANDBOX_UID, an id no user has: nothing of root's is its own, and the per-user
process limit applies (it never does to uid 0). Python dirs that uid could not reach (pyenv under
a 0700 /root) are first bind-mounted, by a small root launcher in a mount namespace of its own,
under a tmpfs it can reach (`_stage_and_exec`).

Isolation levels (recorded in every result row and benchmark):
- `sandbox`: the above, and inside it every job in namespaces of its own (see `child.py`).
- `namespaces`: no bubblewrap; jobs still get their own pid/mount/ipc namespaces and private /tmp
  but see the whole filesystem with your permissions and the network.
- `rlimits-only`: neither (macOS, or user namespaces disabled): resource limits, a temp dir and a
  process group. Not a sandbox.
Below `sandbox`, the executor refuses to start unless JACRL_ALLOW_UNSANDBOXED=1.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import sys
from pathlib import Path

from jacrl.executor.child import MS_BIND, MS_PRIVATE, MS_REC, PRIVATE_DIRS, mount

LEVELS = ("sandbox", "namespaces", "rlimits-only")
ALLOW_ENV = "JACRL_ALLOW_UNSANDBOXED"
SANDBOX_UID = 2_100_000_000  # far from ids that users, containers or older jacrl (200000+) use
SERVER_DIR = "/run/jacrl/executor"  # where the server's files are in the sandbox
JAC_CACHE = "/run/jacrl/jac-cache"  # jaclang's compiled compiler, read-only (jac_cache.py)
KEEP = "/run/jacrl/keep"  # where Python dirs that live under PRIVATE_DIRS are kept for the jobs
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
SYSTEM_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
)
RISK = (
    "model-written code then runs with your permissions: it can read your files (the task "
    "answers included), write them, see your processes and reach the network"
)


class SandboxUnavailable(RuntimeError):
    """No sandbox here, and running without one was not allowed explicitly."""


def allowed_unsandboxed() -> bool:
    return os.environ.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes")


def bwrap() -> str | None:
    return shutil.which("bwrap") if sys.platform.startswith("linux") else None


def why_unsandboxed() -> str | None:
    """None when a sandbox can be had here, else the one-line reason."""
    if not sys.platform.startswith("linux"):
        return f"no sandbox on {sys.platform} (bubblewrap needs Linux namespaces)"
    if bwrap() is None:
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    return None


def refuse(reason: str) -> SandboxUnavailable:
    return SandboxUnavailable(
        f"{reason}; set {ALLOW_ENV}=1 to run without a sandbox anyway ({RISK})"
    )


def _project_root() -> Path | None:
    """The checkout this package runs from, when it is one (editable install)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "data").is_dir() or (root / "drivers").is_dir() else None


def python_dirs() -> list[str]:
    """The directories the interpreter needs: prefixes, site-packages, the executable's dir, each
    also under its resolved path (symlinks inside point there)."""
    dirs = [
        sys.base_prefix,
        sys.prefix,
        sys.base_exec_prefix,
        sys.exec_prefix,
        os.path.dirname(sys.executable),
        *site.getsitepackages(),
    ]
    out: list[str] = []
    for d in dirs:
        for p in (os.path.abspath(d), os.path.realpath(d)):
            if os.path.isdir(p) and p not in out:
                out.append(p)
    # a directory inside another one is bound with it
    out = [p for p in out if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in out)]
    project = _project_root()
    for p in out:
        if project is not None and (project == Path(p) or Path(p) in project.parents):
            raise SandboxUnavailable(
                f"the sandbox would expose the project tree {project}: the "
                f"Python environment {p} contains it; use a venv outside it"
            )
    return out


class Launch:
    """The fork server's command line and the file descriptors it needs. server_files: the script
    first, then the files it loads from its own folder; each is shown at SERVER_DIR/<its name>.
    jac_cache: jaclang's compiled compiler (`jac_cache.py`), shown read-only at JAC_CACHE."""

    def __init__(
        self,
        server_files: list[str],
        args: list[str],
        hash_seed: int | None,
        jac_cache: str | None = None,
    ):
        self.fds: list[int] = []
        as_root = os.geteuid() == 0
        py = os.path.abspath(sys.executable)
        argv = [
            bwrap() or "bwrap",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--cap-drop",
            "ALL",
            "--setenv",
            "PATH",
            "/usr/bin:/bin:" + os.path.dirname(py),
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--setenv",
            "HOME",
            "/tmp",
        ]
        if hash_seed is not None:
            argv += ["--setenv", "PYTHONHASHSEED", str(hash_seed)]
        for name in SYSTEM_DIRS:
            host = "/" + name
            if os.path.islink(host):
                argv += ["--symlink", os.readlink(host), host]
            elif os.path.isdir(host):
                argv += ["--ro-bind", host, host]
        for f in SYSTEM_FILES:
            if os.path.exists(f):
                argv += ["--ro-bind", f, f]
        argv += ["--proc", "/proc", *minimal_dev()]
        for d in PRIVATE_DIRS:  # fresh tmpfs; first: a venv under /tmp is bound on top of it
            argv += ["--tmpfs", d]
        binds = [(d, d) for d in python_dirs()]  # (here, in the sandbox)
        if jac_cache:
            binds.append((jac_cache, JAC_CACHE))
            argv += ["--setenv", "XDG_CACHE_HOME", JAC_CACHE]
        dirs = [d for d, _ in binds]
        stage = _stage_dir(dirs) if as_root else ""
        keep = []
        for i, (d, shown_at) in enumerate(binds):
            src = f"{stage}/{i}" if as_root else d
            argv += ["--ro-bind", src, shown_at]
            if any(_under(shown_at, p) for p in PRIVATE_DIRS):  # jobs cover /tmp: bound back
                keep.append([f"{KEEP}/{i}", shown_at])
                argv += ["--ro-bind", src, f"{KEEP}/{i}"]
        shown = [f"{SERVER_DIR}/{os.path.basename(f)}" for f in server_files]
        for f, path in zip(server_files, shown, strict=True):
            argv += ["--ro-bind-data", str(self._memfd(f)), path]
        argv += [
            "--remount-ro",
            "/",
            "--chdir",
            "/tmp",
            py,
            "-s",
            "-B",
            shown[0],
            *args,
            "--keep",
            json.dumps(keep),
        ]
        if as_root:
            plan = {"uid": SANDBOX_UID, "stage": stage, "dirs": dirs, "argv": argv}
            argv = [py, "-s", "-B", os.path.abspath(__file__), json.dumps(plan)]
        self.argv = argv

    def _memfd(self, path: str) -> int:
        fd = os.memfd_create(os.path.basename(path))
        os.write(fd, Path(path).read_bytes())
        os.lseek(fd, 0, os.SEEK_SET)
        self.fds.append(fd)
        return fd

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def minimal_dev() -> list[str]:
    """bubblewrap arguments for a read-only /dev holding only the device nodes (bound from the
    host's) and the std links: nothing in it is writable, so no job can leave anything there for
    another (bubblewrap's own `--dev` is one writable tmpfs per server, with /dev/shm in it)."""
    argv = ["--tmpfs", "/dev"]
    for name in DEV_NODES:
        if os.path.exists(f"/dev/{name}"):
            argv += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    for name, target in DEV_LINKS:
        argv += ["--symlink", target, f"/dev/{name}"]
    return argv + ["--remount-ro", "/dev"]


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _stage_dir(dirs: list[str]) -> str:
    """An existing directory that holds none of the Python dirs: the root launcher covers it."""
    for d in ("/mnt", "/media", "/srv", "/run", "/var/tmp", "/tmp"):
        if os.path.isdir(d) and not os.path.islink(d) and not any(_under(p, d) for p in dirs):
            return d
    raise SandboxUnavailable("no directory to stage the Python environment for the sandbox")


def _stage_and_exec(plan: dict) -> None:
    """As root, in a process of its own: a private mount namespace in which each Python dir is
    bind-mounted at <stage>/<i> on a fresh 0755 tmpfs, then become SANDBOX_UID and exec bubblewrap
    (which binds <stage>/<i> back at the dir's real path inside the sandbox)."""
    os.unshare(os.CLONE_NEWNS)
    mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
    stage = plan["stage"]
    mount(b"tmpfs", stage.encode(), b"tmpfs", 0, b"size=1m,mode=755")
    for i, d in enumerate(plan["dirs"]):
        os.mkdir(f"{stage}/{i}", 0o755)
        mount(d.encode(), f"{stage}/{i}".encode(), None, MS_BIND | MS_REC, None)
    uid = plan["uid"]
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    os.execv(plan["argv"][0], plan["argv"])


if __name__ == "__main__":
    _stage_and_exec(json.loads(sys.argv[1]))
