"""A model's chat template rendered under a time limit: `bound_rendering(tokenizer, what)` makes
the tokenizer's `apply_chat_template` stop a render that runs past RENDER_LIMIT_S with one
`TemplateTooSlow` line naming the model and its template.

transformers renders in Jinja's sandbox (no code execution, no file reads: kept), which does not
bound time: `{% for a in range(99999) %}{% for b in range(99999) %}...` runs for hours. Jinja
compiles a template to Python code whose file name is `<template>`; while a render runs, a trace
function sees each call and each line of that code and raises once the deadline has passed. A
render of a real prompt stays far below the bound (jac-tiny's: ~0.2 ms, traced).

`jacrl models import` renders a probe chat under the same bound and refuses a template that
exceeds it. Not covered: one C-level operation that is slow by itself (a huge integer power such
as `{{ 9**9**9 }}`) cannot be interrupted from Python, at import or later.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

RENDER_LIMIT_S = 5.0
_TEMPLATE_FILE = "<template>"  # the file name Jinja gives code compiled from a string


class TemplateTooSlow(ValueError):
    """A chat template that did not render within the limit; the message is one line."""


def template_source(model_dir: Path) -> Path:
    """The file that holds a model directory's chat template, for messages."""
    jinja = model_dir / "chat_template.jinja"
    return jinja if jinja.is_file() else model_dir / "tokenizer_config.json"


def bounded(render, what: str, limit_s: float | None = None):
    """`render` (an apply_chat_template) that raises TemplateTooSlow after `limit_s` seconds
    (default: RENDER_LIMIT_S, read at each render)."""

    def call(*args, **kwargs):
        limit = RENDER_LIMIT_S if limit_s is None else limit_s
        deadline = time.monotonic() + limit

        def trace(frame, event, arg):
            if time.monotonic() > deadline:
                raise TemplateTooSlow(
                    f"{what}: its chat template did not render within {limit:g} s (a template "
                    "must render a prompt in well under a second: loops bounded by the messages)"
                )
            return trace if frame.f_code.co_filename == _TEMPLATE_FILE else None

        before = sys.gettrace()
        sys.settrace(trace)
        try:
            return render(*args, **kwargs)
        finally:
            sys.settrace(before)

    call.__wrapped__ = render
    return call


def bound_rendering(tokenizer, what: str, limit_s: float | None = None):
    """Bound every chat-template render of `tokenizer` (mlx-lm's wrapper, or a transformers
    tokenizer) in place; `what` names the model and its template in the error. Returns it."""
    inner = getattr(tokenizer, "_tokenizer", None)
    for tok in (tokenizer, inner) if inner is not None else (tokenizer,):
        render = tok.apply_chat_template
        if not hasattr(render, "__wrapped__"):
            object.__setattr__(tok, "apply_chat_template", bounded(render, what, limit_s))
    return tokenizer
