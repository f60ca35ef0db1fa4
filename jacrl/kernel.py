"""The `jacrl` Jupyter kernel: this interpreter with OpenBLAS preloaded.

On Linux CPU, MLX's wheel uses a reference BLAS ~10x slower than OpenBLAS, and the dynamic loader
reads LD_PRELOAD only at process start, so a notebook cannot switch it on for itself (the `jacrl`
CLI re-execs instead). The kernelspec carries `jacrl.blas.preload_env()` in its `env`, so every
kernel Jupyter starts from it has OpenBLAS, with the OPENBLAS_NUM_THREADS of the environment that
starts it (a count frozen at install would override the ladder's and the user's). `jacrl kernel`
(or `python -m jacrl.kernel`, as `make setup` does) installs it, like `python -m ipykernel
install --sys-prefix --name jacrl`; the notebooks name this kernel in their metadata, and `jacrl
ladder run` runs its cells on it when it is installed for this interpreter (else on `python3`,
with the same environment passed by the ladder).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from jacrl.blas import preload_env

NAME = "jacrl"
DISPLAY_NAME = f"jacrl (Python {sys.version_info.major}.{sys.version_info.minor})"
FALLBACK = "python3"


def install(prefix: str | os.PathLike | None = None) -> Path:
    """Install (or refresh) the kernelspec in `prefix`/share/jupyter/kernels/jacrl (default: this
    environment's prefix, like --sys-prefix). Returns its folder."""
    import fcntl

    from ipykernel.kernelspec import install as ipykernel_install

    prefix = str(prefix or sys.prefix)
    kernels = Path(prefix) / "share" / "jupyter" / "kernels"
    kernels.mkdir(parents=True, exist_ok=True)
    env = preload_env()  # no thread count: the kernel keeps the one of whoever starts it
    # ipykernel replaces the folder (rmtree + copy): leave an up-to-date spec alone, so a kernel
    # being started from it meanwhile (another test process, a running lab) never misses it
    with open(kernels / f".{NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _spec_is(kernels / NAME, env):
            return kernels / NAME
        return Path(
            ipykernel_install(kernel_name=NAME, display_name=DISPLAY_NAME, prefix=prefix, env=env)
        )


def _spec_is(folder: Path, env: dict[str, str]) -> bool:
    """Whether `folder` holds our spec: this interpreter, our name, this environment."""
    try:
        spec = json.loads((folder / "kernel.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        spec.get("argv", [""])[0] == sys.executable
        and spec.get("display_name") == DISPLAY_NAME
        and spec.get("env", {}) == env
    )


def for_cells() -> str:
    """The kernel papermill should run cells on: `jacrl` when its spec starts this interpreter,
    else `python3` (a `jacrl` spec from another environment would import another jacrl)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(NAME)
    except NoSuchKernel:
        return FALLBACK
    same = os.path.abspath(spec.argv[0]) == os.path.abspath(sys.executable)
    return NAME if same else FALLBACK


def describe(path: Path) -> str:
    """What an install did, for a reader: the kernel's folder and its kernel.json on one line."""
    spec = " ".join((path / "kernel.json").read_text().split())
    return f"installed the {DISPLAY_NAME!r} kernel in {path}\nits kernel.json: {spec}"


if __name__ == "__main__":  # `python -m jacrl.kernel` (make setup); options: `jacrl kernel`
    print(describe(install()))
