"""Joining a Ray cluster, or starting a local Ray instance, for the Ray engine
(`jacrl.ladder.ray_engine`): `connect`. Ray failing either way is a `RayStartError`, one line
naming what failed, Ray's reason and what to try (never Ray's traceback); a local start is tried
`START_TRIES` times, with a longer window for Ray's GCS to start, so a loaded machine does not
fail it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

import ray  # the optional `ray` extra: this module is imported only for --engine ray

from jacrl.ladder.ray_cell import STORE_ENV
from jacrl.project import ROOT_ENV, find_root

RESOURCE = "mlx"  # the custom resource a node offers once per accelerator
START_TRIES = 2  # starts of a local Ray instance before giving up (a loaded machine can miss one)
GCS_WAIT_ENV, GCS_WAIT_S = "RAY_gcs_server_port_wait_time_s", "120"  # Ray's default: 30 s
TRACEBACK = "Traceback (most recent call last):"


def reachable(address: str, timeout: float = 3.0) -> bool:
    """Whether something listens at a host:port address (other forms, e.g. ray:// or auto, are
    left to Ray), checked first because Ray itself retries a dead address for minutes."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return True
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError:
        return False
    return True


class RayStartError(ValueError):
    """Ray could not start here or be joined there: one line naming what failed and what to try
    (a ValueError, so the CLI prints it as one line and exits 2)."""


def _line(e: BaseException) -> str:
    """An error's first line; where Ray put a formatted traceback in the message, the first line
    before it and the traceback's last line (the reason)."""
    head, tb, tail = str(e).strip().partition(TRACEBACK)
    lines = [ln.strip() for ln in head.splitlines() if ln.strip()] or [type(e).__name__]
    last = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    return f"{lines[0]} {last[-1]}" if tb and last else lines[0]


def _why(e: BaseException) -> str:
    """An error's line, and its cause's when that says more (Ray wraps the reason)."""
    msg = _line(e)
    if e.__cause__ is not None and _line(e.__cause__) not in msg:
        msg += f": {_line(e.__cause__)}"
    return msg if len(msg) <= 400 else msg[:400].rsplit(". ", 1)[0] + ". …"  # whole sentences


def _join(address: str, quiet: dict) -> None:
    try:
        ray.init(address=address, **quiet)
    except Exception as e:  # Ray raises ConnectionError, RuntimeError, bare Exception
        ray.shutdown()
        raise RayStartError(
            f"Ray could not join the cluster at {address}: {_why(e)} (try `ray status --address "
            f"{address}` on a node; the driver needs the cluster's token: RAY_AUTH_TOKEN or "
            "~/.ray/auth_token)"
        ) from e


def _start_local(store: str, quiet: dict, log: Callable[[str], None]) -> None:
    """A local Ray instance, tried START_TRIES times: on a loaded machine a node can miss Ray's
    fixed 30 s window to register, and its GCS the 30 s it gets to start (lengthened here)."""
    os.environ.setdefault(GCS_WAIT_ENV, GCS_WAIT_S)
    for attempt in range(1, START_TRIES + 1):
        try:
            ray.init(
                address="local",
                resources={RESOURCE: 1},
                include_dashboard=False,
                runtime_env={"env_vars": {ROOT_ENV: str(find_root()), STORE_ENV: store}},
                **quiet,
            )
            return
        except Exception as e:  # bare Exception (a node timed out), RuntimeError, OSError
            ray.shutdown()
            if attempt == START_TRIES:
                raise RayStartError(
                    f"Ray could not start a local instance ({attempt} tries): {_why(e)} (try "
                    f"`ray start --head --resources '{{\"{RESOURCE}\": 1}}'`, whose log says "
                    "more, then --address 127.0.0.1:6379; or --engine local)"
                ) from e
            log(f"ray: a local instance did not start ({_why(e)}); trying again")


def connect(address: str | None, store: str, log: Callable[[str], None] = print) -> bool:
    """Join the cluster at `address` (else RAY_ADDRESS), or start a local instance offering one
    `mlx`, whose cells run in this project and keep artifacts in `store`. True when this call
    initialized Ray. Ray failing to start or to join is a `RayStartError`, one line."""
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no reporting home
    address = address or os.environ.get("RAY_ADDRESS") or None
    quiet = {"log_to_driver": False, "logging_level": "WARNING"}
    if address and not reachable(address):
        raise RayStartError(f"no Ray cluster at {address} (start one with `ray start --head`)")
    if address:
        _join(address, quiet)
    else:
        _start_local(store, quiet, log)
    if ray.cluster_resources().get(RESOURCE, 0) < 1:
        ray.shutdown()
        raise RayStartError(
            f"no node of the Ray cluster at {address} offers the {RESOURCE!r} "
            f"resource: start nodes with --resources '{{\"{RESOURCE}\": 1}}'"
        )
    return True
