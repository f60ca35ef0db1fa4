"""A GRPO run's checkpoint, so that a run stopped part way (a session's end, a kill, Ctrl-C) goes
on from its last report instead of from step 0: on SmolLM2 a step of the main tasks costs about
a minute, and 100 steps outlast a working session.

After every report (`steps_per_report`) but the last, the loop saves the LoRA weights, the
optimizer's state (Adam's moments and step), the run's logs so far (metrics.jsonl,
rollouts.jsonl) and what the run resolved before its first step (the calibrated temperature).
They live beside the build's temp dir, named for the artifact (`resume_dir`), because
`build_artifact` gives every build a new temp dir and removes a killed one's. A rerun of the
same key restores them and replays the prompt order up to that step; every step's rollouts are
seeded by its number, so the resumed run writes the same adapter bytes as one that never
stopped (tests/test_checkpoint.py). The directory goes once the artifact is complete.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

STATE, LATEST = "state.json", "latest"
WEIGHTS, OPTIMIZER = "adapters.safetensors", "optimizer.safetensors"


def resume_dir(tmp: Path) -> Path:
    """Where the build in temp dir `tmp` keeps its checkpoints: `build_artifact` names its temp
    dirs `.<name>.tmp-<pid>`, so `.<name>.resume` is the same for every build of the key."""
    name, sep, _ = tmp.name.rpartition(".tmp-")
    if not sep:
        raise ValueError(f"{tmp} is not a build's temp dir (.<name>.tmp-<pid>)")
    return tmp.parent / f"{name}.resume"


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int
    state: dict


def latest(root: Path, key: str) -> Checkpoint | None:
    """The last checkpoint saved under `root` for this artifact key; None when there is none or
    it belongs to another key (then it is removed)."""
    try:
        path = root / (root / LATEST).read_text().strip()
        state = json.loads((path / STATE).read_text())
    except (OSError, ValueError):
        return None
    if state.get("key") != key:
        shutil.rmtree(root, ignore_errors=True)
        return None
    return Checkpoint(path, int(state["step"]), state)


def save(root: Path, key: str, step: int, policy, optimizer, logs: list[Path], **state) -> None:
    """The run after `step`: written to a temp dir, renamed into place, then named in `latest`
    (a kill at any point leaves the previous checkpoint whole); older ones removed."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    name = f"step-{step:06d}"
    tmp = root / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    mx.save_safetensors(str(tmp / WEIGHTS), dict(tree_flatten(policy.trainable_parameters())))
    mx.save_safetensors(str(tmp / OPTIMIZER), dict(tree_flatten(optimizer.state)))
    for log in logs:
        if log.exists():
            shutil.copy2(log, tmp / log.name)
    (tmp / STATE).write_text(json.dumps({"key": key, "step": step, **state}) + "\n")
    shutil.rmtree(root / name, ignore_errors=True)
    os.replace(tmp, root / name)
    pointer = root / f".{LATEST}.tmp"
    pointer.write_text(name + "\n")
    os.replace(pointer, root / LATEST)
    for old in root.glob("step-*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)


def restore(ck: Checkpoint, policy, optimizer, out_dir: Path, logs: list[Path]) -> None:
    """Puts the checkpoint's LoRA weights into `policy`, its state into `optimizer` (initialised
    on the policy's trainable tree first, then every saved array assigned by its path) and its
    logs into `out_dir` in place of whatever a killed run left there."""
    import mlx.core as mx

    policy.load_weights(list(mx.load(str(ck.path / WEIGHTS)).items()), strict=False)
    optimizer.init(policy.trainable_parameters())
    for key, value in mx.load(str(ck.path / OPTIMIZER)).items():
        _assign(optimizer.state, key.split("."), value)
    mx.eval(policy.parameters(), optimizer.state)
    for log in logs:
        saved = ck.path / log.name
        if saved.exists():
            shutil.copy2(saved, out_dir / log.name)
        else:
            log.unlink(missing_ok=True)


def reload(metrics, path: Path) -> None:
    """A restored metrics.jsonl's records into the run's callback, as if it had written them."""
    lists = {"train": metrics.train, "val": metrics.val, "step": metrics.steps}
    for line in path.read_text().splitlines() if path.exists() else []:
        rec = json.loads(line)
        lists[rec["event"]].append(rec)


def _assign(tree, path: list[str], value) -> None:
    """tree[path] = value, walking dicts by key and lists by index (a flattened tree's keys)."""
    *inner, last = path
    for part in inner:
        tree = tree[int(part)] if isinstance(tree, list) else tree[part]
    if isinstance(tree, list):
        tree[int(last)] = value
    else:
        tree[last] = value
