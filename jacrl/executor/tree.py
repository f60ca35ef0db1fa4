"""The read-only files a job sees, copied once per client process onto a tmpfs: only what the
interpreter and jaclang need (the interpreter and its shared libraries, the standard library but
its test suites and GUI, jaclang and the packages it requires, the time zones, jaclang's compiled
compiler), shown by the sandbox at their own paths (`sandbox.Launch`).

Why a copy: the page cache of a disk file is one store for the whole machine. A job that reads a
file loads its pages, and a later job, even on a new server, can tell by a read's time which
pages were loaded: a channel (a writer that warmed chosen files moved a solver's answers to a
later job). A tmpfs file's pages are the file itself: always resident, so a read takes the same
time whoever read it before, and nothing a job does to the tree can be seen. One copy serves every
server of the process (the tree is read-only to all of them); it is removed at exit, and copies
left by processes that died are removed by the next one.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from importlib import metadata

TMPFS_BASES = ("/dev/shm",)  # where the copy may live: a tmpfs the sandbox uid can reach
PREFIX = "jacrl-tree-"
# the test suites and the GUI (which needs X11); config-*: what C extensions build against
SKIP_STDLIB = {"test", "tests", "idle_test", "idlelib", "tkinter", "turtledemo", "site-packages",
               "dist-packages"}  # fmt: skip
SKIP_FILE = re.compile(r"\.opt-[12]\.pyc$|^_tkinter")  # -O caches; Tk (and X11 under it)
SYSTEM = ("/etc/ld.so.cache", "/etc/localtime", "/usr/share/zoneinfo", "/usr/lib/locale/C.utf8")
TMPFS_MAGIC = "tmpfs"


class TreeUnavailable(RuntimeError):
    """No tmpfs here with room for the tree."""


def _walk(top: str, skip: set[str] = frozenset()) -> list[str]:
    out = []
    for dirpath, dirnames, files in os.walk(top):
        dirnames[:] = [d for d in dirnames if d not in skip and not d.startswith("config-")]
        out += [os.path.join(dirpath, f) for f in files if not SKIP_FILE.search(f)]
        out += [
            os.path.join(dirpath, d) for d in dirnames if os.path.islink(os.path.join(dirpath, d))
        ]
    return out


def _distributions(root: str) -> list[metadata.Distribution]:
    """`root` and every distribution it requires (extras left out), as installed."""
    seen, todo, out = set(), [root], []
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        out.append(dist)
        for spec in dist.requires or ():
            if "extra" not in spec.partition(";")[2]:  # an extra's requirement: not installed
                todo.append(re.match(r"[A-Za-z0-9._-]+", spec).group())
    return out


def _libraries(files: list[str]) -> list[str]:
    """The shared libraries the interpreter and the extension modules among `files` load."""
    if shutil.which("ldd") is None:
        raise TreeUnavailable(
            "ldd is not installed (Debian: libc-bin): no way to list the libraries"
        )
    objects = [f for f in files if f.endswith(".so") or ".so." in os.path.basename(f)]
    libs: set[str] = set()
    for i in range(0, len(objects), 200):
        out = subprocess.run(
            ["ldd", *objects[i : i + 200]], capture_output=True, text=True, check=False
        ).stdout
        libs |= set(re.findall(r"(/\S+) \(0x", out))
    return sorted(libs)


@functools.cache
def manifest() -> tuple[str, ...]:
    """Every path (file, or symlink) of the tree, absolute, as on this machine."""
    stdlib = sysconfig.get_paths()["stdlib"]
    files = _walk(stdlib, SKIP_STDLIB)
    exe = os.path.abspath(sys.executable)
    files += [exe, os.path.realpath(exe), os.path.join(sys.prefix, "pyvenv.cfg")]
    files += [
        os.path.join(os.path.dirname(exe), n)
        for n in os.listdir(os.path.dirname(exe))
        if n.startswith("python")
    ]
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    if os.path.isdir(libdir):
        files += [os.path.join(libdir, n) for n in os.listdir(libdir) if n.startswith("libpython")]
    for dist in _distributions("jaclang"):
        base = dist.locate_file("")
        files += [str(base / f) for f in dist.files or ()]
    for p in SYSTEM:
        files += _walk(p) if os.path.isdir(p) else [p]
    files = [f for f in files if os.path.lexists(f)]
    files += _libraries([os.path.realpath(exe), *files])
    return tuple(sorted(set(files)))


def _put(src: str, root: str) -> None:
    """`src` at root + its path: the file under its real path, and a link where its path is not
    its real one (a venv's python, a library's soname)."""
    real = os.path.realpath(src)
    at = os.path.join(os.path.realpath(os.path.dirname(src)), os.path.basename(src))
    if os.path.isfile(real):
        dest = root + real
        if not os.path.exists(dest):
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(real, dest)
    if at != real:
        link = root + at
        if not os.path.lexists(link):
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(real, link)


def _is_tmpfs(path: str) -> bool:
    best, kind = "", ""
    with open("/proc/mounts") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 2 and (path == parts[1] or path.startswith(parts[1].rstrip("/") + "/")):
                if len(parts[1]) >= len(best):
                    best, kind = parts[1], parts[2]
    return kind == TMPFS_MAGIC


def size() -> int:
    return sum(os.path.getsize(f) for f in manifest() if os.path.isfile(f))


def why_none() -> str | None:
    """None when this process has its tree or can make one, else the one-line reason."""
    if os.path.isdir(_TREE.get(os.getpid(), "")):
        return None
    try:
        where()
    except TreeUnavailable as e:
        return str(e)
    return None


def where() -> str:
    """A tmpfs with room for the tree (TreeUnavailable, with why, if none)."""
    need = size() * 5 // 4
    for base in TMPFS_BASES:
        if os.path.isdir(base) and _is_tmpfs(base):
            st = os.statvfs(base)
            if st.f_bavail * st.f_frsize >= need:
                return base
    raise TreeUnavailable(
        f"no tmpfs with {need >> 20} MiB free for the jobs' read-only tree (tried "
        f"{', '.join(TMPFS_BASES)}): on a disk its page cache would carry data between jobs"
    )


def _prune(base: str) -> None:
    """Copies whose process is gone."""
    for name in os.listdir(base):
        m = re.fullmatch(PREFIX + r"(\d+)-\w+", name)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


_TREE: dict[int, str] = {}  # by pid: a fork of the client makes its own


def tree() -> str:
    """The tree's root (a directory on a tmpfs, mirroring real paths), built on first use."""
    pid = os.getpid()
    if pid in _TREE and os.path.isdir(_TREE[pid]):
        return _TREE[pid]
    base = where()
    _prune(base)
    root = tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-", dir=base)
    try:
        for f in manifest():
            _put(f, root)
        for dirpath, _, _ in os.walk(root):  # the sandbox uid reads it (files keep their modes)
            os.chmod(dirpath, 0o755)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    atexit.register(_remove, root, pid)
    _TREE[pid] = root
    return root


def _remove(root: str, owner: int) -> None:
    if os.getpid() == owner:  # not in a forked child that exits normally
        shutil.rmtree(root, ignore_errors=True)


def copy_dir(src: str, name: str) -> str:
    """A copy of a directory of the host (jaclang's compiled compiler) inside the tree."""
    dest = os.path.join(tree(), "extra", name)
    if not os.path.isdir(dest):
        shutil.copytree(src, dest, symlinks=True)
        for dirpath, _, _ in os.walk(dest):
            os.chmod(dirpath, 0o755)
    return dest
