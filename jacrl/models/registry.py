"""Models: a local MLX model directory, or a name in the project's `models/registry.toml`; and the
one loader, strictly offline and cached.

`jac-tiny` is the embedded default model (built by `jacrl.models.tiny_model`, `jacrl tiny-model`).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from jacrl.models.attention import fold_gqa
from jacrl.models.chat_template import bound_rendering, template_source
from jacrl.project import ProjectNotFound, find_root, project

TINY = "jac-tiny"  # the embedded default, models/jac-tiny in the project
CACHE_SIZE = 2  # loads kept by `load`: a base model and one adapter on it, say


class ModelError(ValueError):
    """A model name or path that cannot be used; the message is one line."""


def _project():
    try:
        return project()
    except ProjectNotFound:
        return None


def display_path(path: str | os.PathLike) -> str:
    """Project-relative path when possible (shorter, stable messages and records), else as is."""
    proj = _project()
    return proj.rel(path) if proj else str(path)


def default_registry() -> Path | None:
    proj = _project()
    return proj.registry if proj else None


def portable(model: str | os.PathLike) -> str:
    """How a result row names a model: its registry name, or its project-relative path (never an
    absolute path that ties rows to one machine)."""
    if not Path(model).expanduser().is_dir():
        return str(model)
    return display_path(Path(model).expanduser())


def read_registry(registry: Path | None = None) -> dict[str, dict]:
    """The `[models.<name>]` tables of the registry file ({} if there is none)."""
    registry = registry if registry is not None else default_registry()
    if registry is None or not Path(registry).is_file():
        return {}
    with open(registry, "rb") as f:
        return tomllib.load(f).get("models", {})


def resolve(model: str | os.PathLike, *, registry: Path | None = None) -> Path:
    """Map a local MLX model directory or a registry name (in the project's models/registry.toml)
    to a directory holding config.json.

    An existing directory wins over a registry name. Never touches the network.
    """
    registry = registry if registry is not None else default_registry()
    if registry is None:
        if not Path(model).expanduser().is_dir():
            find_root()  # raises the one-line "not inside a jacrl project" error
    registry = Path(registry) if registry is not None else Path("models/registry.toml")
    candidate = Path(model).expanduser()
    if candidate.is_dir():
        path, origin = candidate, f"directory {display_path(candidate)}"
        where = ""
    else:
        entries = read_registry(registry)
        entry = entries.get(str(model))
        if entry is None or "path" not in entry:
            known = ", ".join(sorted(entries)) or "none"
            raise ModelError(
                f"unknown model {str(model)!r}: not a directory and not a name in "
                f"{display_path(registry)} (known: {known})"
            )
        # Registry paths are relative to the repo root (the registry's parent's parent).
        path = (registry.resolve().parent.parent / Path(entry["path"]).expanduser()).resolve()
        origin = f"model {str(model)!r} (path {entry['path']!r} in {display_path(registry)})"
        where = f" at {display_path(path)}"
    if not (path / "config.json").is_file():
        hint = " (build it with `jacrl tiny-model`)" if path.name == TINY else ""
        raise ModelError(f"{origin} has no config.json{where}{hint}")
    return path.resolve()


def set_offline() -> None:
    """Never reach the Hugging Face hub. Must happen before huggingface_hub/transformers are
    imported: they read these at import."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


_LOADED: dict[tuple, tuple] = {}


def _adapter_stamp(adapter: str | os.PathLike | None) -> tuple:
    """An adapter dir's identity for the cache: its path and its weights' mtime and size, so an
    adapter retrained in place is loaded again."""
    if not adapter:
        return ()
    f = Path(adapter) / "adapters.safetensors"
    st = f.stat() if f.exists() else None
    return (str(Path(adapter).resolve()), st.st_mtime_ns if st else 0, st.st_size if st else 0)


def load(model, adapter_path: str | os.PathLike | None = None, *, fresh: bool = False):
    """(model, tokenizer) for a registry name or a model dir (+ a LoRA adapter dir), via
    mlx_lm.load, strictly offline. An already loaded (model, tokenizer) pair passes through.

    The last CACHE_SIZE loads are cached (keyed by the resolved path and the adapter's stamp) and
    shared: do not change their weights. fresh=True loads a private copy, not cached, for a
    caller that does (training adds LoRA layers in place).
    """
    if isinstance(model, tuple):
        return model
    path = resolve(model)
    adapter = str(adapter_path) if adapter_path else None
    if fresh:
        return _mlx_load(path, adapter)
    key = (str(path), _adapter_stamp(adapter_path))
    if key not in _LOADED:
        if len(_LOADED) >= CACHE_SIZE:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = _mlx_load(path, adapter)
    return _LOADED[key]


def load_tokenizer(model):
    """The tokenizer `load` gives with the model (mlx-lm's wrapper, config.json's end tokens),
    without loading the weights: for a caller whose decoding runs in worker processes that load
    the model themselves, and for `jacrl models check`. A config or tokenizer that cannot be read
    is one ModelError line naming the file."""
    if isinstance(model, tuple):
        return model[1]
    path = resolve(model)
    set_offline()
    from mlx_lm.utils import load_tokenizer as _load
    from transformers.utils import logging as hf_logging

    try:
        config = json.loads((path / "config.json").read_text())
    except ValueError as e:
        raise ModelError(f"{display_path(path / 'config.json')}: not JSON ({e})") from None
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its warnings about the config are `models check`'s to say
    try:
        tok = _load(path, eos_token_ids=config.get("eos_token_id"))
    except Exception as e:  # noqa: BLE001 - transformers raises many kinds; all mean "cannot load"
        msg = " ".join(str(e).split()) or type(e).__name__
        raise ModelError(f"{display_path(path)}: cannot load its tokenizer: {msg}") from None
    finally:
        hf_logging.set_verbosity(level)
    return bound_chat_template(tok, path)


def _mlx_load(path: Path, adapter: str | None):
    set_offline()
    import mlx_lm  # heavy (MLX): only when a model is loaded

    model, tokenizer = mlx_lm.load(str(path), adapter_path=adapter)
    fold_gqa(model)  # decode steps without a copy of the KV cache per layer (same logits)
    return model, bound_chat_template(tokenizer, path)


def bound_chat_template(tokenizer, path: Path):
    """The tokenizer of the model at `path` with every chat-template render bounded in time
    (`jacrl.models.chat_template`): a template that loops for ever is one line naming it."""
    what = f"model {display_path(path)} ({display_path(template_source(path))})"
    return bound_rendering(tokenizer, what)
