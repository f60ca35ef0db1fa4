"""Where the fork server runs: inside a bubblewrap sandbox, so model-written code sees the
interpreter and nothing else of the machine.

The sandbox (bubblewrap, Debian `bubblewrap`; it uses the kernel's user namespaces, so it works as
root and as a normal user) shows read-only only the files the interpreter and jaclang need, from a
copy on a tmpfs (`tree.py`: a disk file's page cache would carry data between jobs): the
interpreter and the shared libraries it loads, the standard library, the venv's jaclang and what
it requires, the linker cache and the time zones, the server's files and jaclang's own compiled
compiler (`jac_cache.py`); writable: only fresh tmpfs (/tmp, /var/tmp); /dev is read-only with
only the device nodes (`minimal_dev`). No project tree, no home directory, no /usr beyond those
libraries, no other process (own pid namespace), no network (own net namespace), an empty
environment, no capabilities. As root the sandbox runs as SANDBOX_UID, an id no user has: nothing
of root's is its own, and the per-user process limit applies (it never does to uid 0); the tree
is on a tmpfs that uid can reach, wherever the interpreter lives (pyenv under a 0700 /root).

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

from jacrl.executor.child import PRIVATE_DIRS

LEVELS = ("sandbox", "namespaces", "rlimits-only")
ALLOW_ENV = "JACRL_ALLOW_UNSANDBOXED"
SANDBOX_UID = 2_100_000_000  # far from ids that users, containers or older jacrl (200000+) use
SERVER_DIR = "/run/jacrl/executor"  # where the server's files are in the sandbox
JAC_CACHE = "/run/jacrl/jac-cache"  # jaclang's compiled compiler, read-only (jac_cache.py)
KEEP = "/run/jacrl/keep"  # where Python dirs that live under PRIVATE_DIRS are kept for the jobs
SYSTEM_DIRS = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
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
    from jacrl.executor import tree  # here: this file also runs as the root launcher's script

    return tree.why_none()


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
        from jacrl.executor import tree

        root = tree.tree()  # the files jobs may read, on a tmpfs (tree.py)
        for name in SYSTEM_DIRS:
            host = "/" + name
            if os.path.islink(host):
                argv += ["--symlink", os.readlink(host), host]
            elif os.path.isdir(root + host):
                argv += ["--ro-bind", root + host, host]
        argv += ["--proc", "/proc", *minimal_dev()]
        for d in PRIVATE_DIRS:  # fresh tmpfs; first: a venv under /tmp is bound on top of it
            argv += ["--tmpfs", d]
        binds = [(root + os.path.realpath(d), d) for d in python_dirs()]  # (copy, in the sandbox)
        if jac_cache:
            binds.append((tree.copy_dir(jac_cache, os.path.basename(jac_cache)), JAC_CACHE))
            argv += ["--setenv", "XDG_CACHE_HOME", JAC_CACHE]
        keep = []
        for i, (src, shown_at) in enumerate(binds):
            os.makedirs(src, mode=0o755, exist_ok=True)
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
        if as_root:  # become SANDBOX_UID first (see _exec_as)
            argv = [py, "-s", "-B", os.path.abspath(__file__), json.dumps([SANDBOX_UID, argv])]
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


def _exec_as(uid: int, argv: list[str]) -> None:
    """As root, in a process of its own: become `uid` (no groups) and exec bubblewrap."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    _exec_as(*json.loads(sys.argv[1]))
