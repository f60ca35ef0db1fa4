"""`jacrl <verb>`: a thin argparse shell over the library's functions.

The project (drivers/, data/, models/, results/, ...) is `--root DIR`, else JACRL_ROOT, else the
nearest folder holding jacrl.toml above the working directory (`jacrl.project`). Expected errors
(a bad argument, a missing file or model, a corrupt JSONL line) print one line,
`jacrl: <verb>: <message>`, and exit 2; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from jacrl.blas import ensure_fast_blas
from jacrl.cli import evaluate as evaluate_cli
from jacrl.cli import ladder as ladder_cli
from jacrl.cli import learnable as learnable_cli
from jacrl.cli import models as models_cli
from jacrl.cli import reward as reward_cli
from jacrl.cli import samples as samples_cli
from jacrl.cli import tasks as tasks_cli
from jacrl.cli import train as train_cli
from jacrl.executor import SandboxUnavailable
from jacrl.models.registry import ModelError
from jacrl.project import ROOT_ENV, ProjectNotFound, find_root
from jacrl.stages import STAGES

# what a user can get wrong; anything else is a bug and keeps its traceback
EXPECTED = (
    ValueError,
    KeyError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    ProjectNotFound,
    ModelError,
    SandboxUnavailable,
)
MLX_VERBS = ("tiny-model", "train", "eval", "generate", "ladder", "demo")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option's default shown unless its help already names it."""

    def _get_help_string(self, action):
        help = action.help or ""
        return help if "default" in help else super()._get_help_string(action)


def sentence(text: str) -> str:
    """A help line as the sentence that opens a command's --help: capitalised, with its stop."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "?", "!")) else ".")


class Parser(argparse.ArgumentParser):
    """Subparsers inherit the class: the help formatter everywhere, usage errors in one line, no
    abbreviated options (`--rung` is not `--rungs`: a typo never picks a flag), and a subcommand
    given no description opens its --help with its one-line help, as a sentence."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs):
        action = super().add_subparsers(**kwargs)
        add = action.add_parser

        def add_parser(name, **kw):
            if kw.get("description") is None and kw.get("help"):
                kw["description"] = sentence(kw["help"])
            return add(name, **kw)

        action.add_parser = add_parser
        return action

    def error(self, message):
        verb = self.prog.removeprefix("jacrl").strip()
        print(
            f"jacrl: {verb + ': ' if verb else ''}{message} (see {self.prog} --help)",
            file=sys.stderr,
        )
        raise SystemExit(2)


def one_line(e: BaseException) -> str:
    """The message of an expected error, on one line."""
    if isinstance(e, OSError) and e.filename:
        return f"{e.filename}: {e.strerror}"
    if isinstance(e, SystemExit):
        msg = str(e.code)
    elif isinstance(e, KeyError) and e.args:
        msg = str(e.args[0])  # str(KeyError) would add quotes
    else:
        msg = str(e) or type(e).__name__
    return "; ".join(line.strip() for line in msg.splitlines() if line.strip())


def _version() -> str:
    try:
        return version("jacrl")
    except PackageNotFoundError:  # a bare checkout on sys.path, never installed
        return "unknown (not installed)"


# -------------------------------------------------------------------------------------------
# the parser
# -------------------------------------------------------------------------------------------


DESCRIPTION = f"""\
Teach small code models the Jac language: build tasks from Jac programs with a hole, train LoRA
adapters on them (stages {", ".join(STAGES)}), evaluate with a reward that runs the model's
code, and run the ladder of experiments. `jacrl VERB --help` says what each verb does; the README
and docs/ say more.

The project (drivers/, data/, models/, results/, ...) is `--root DIR`, else JACRL_ROOT, else the
nearest folder holding jacrl.toml above the working directory. An expected error (a bad argument,
a missing file or model, a corrupt JSONL line) prints one line, `jacrl: VERB: MESSAGE`, and exits
2; `--debug` shows the traceback instead."""


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="jacrl", description=DESCRIPTION)
    ap.add_argument("--version", action="version", version=f"jacrl {_version()}")
    ap.add_argument(
        "--root",
        default=None,
        metavar="DIR",
        help=f"the project folder (sets {ROOT_ENV} for this process and the ladder's "
        f"cells; default: {ROOT_ENV}, else the nearest folder with jacrl.toml "
        "above the working directory)",
    )
    ap.add_argument(
        "--allow-unsandboxed",
        action="store_true",
        help="run model-written code even where no sandbox is available (it can then "
        "read and write your files; same as JACRL_ALLOW_UNSANDBOXED=1)",
    )
    ap.add_argument(
        "--debug",
        action="store_true",
        help="show the Python traceback of an error instead of its one-line message",
    )
    sub = ap.add_subparsers(dest="verb", required=True, metavar="VERB")
    tasks_cli.add(sub)

    reward_cli.add(sub)
    models_cli.add(sub)
    train_cli.add(sub)
    evaluate_cli.add(sub)
    samples_cli.add(sub)
    learnable_cli.add(sub)
    ladder_cli.add(sub)
    return ap


def _verb(args: argparse.Namespace) -> str:
    return " ".join(
        v
        for v in (args.verb, getattr(args, "ladder_verb", None), getattr(args, "models_verb", None))
        if v
    )


def main(argv: list[str] | None = None) -> int:
    """The `jacrl` command. argv None: this process's arguments (then, for MLX verbs on Linux, the
    process re-execs itself once with OpenBLAS preloaded)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version, or a usage error already printed in one line
        return e.code if isinstance(e.code, int) else 2
    try:
        if args.root is not None:  # cells, papermill and re-execs inherit the environment
            os.environ[ROOT_ENV] = str(find_root(args.root))
        if args.allow_unsandboxed:
            os.environ["JACRL_ALLOW_UNSANDBOXED"] = "1"
        if argv is None and args.verb in MLX_VERBS:
            ensure_fast_blas()  # Linux: re-exec with OpenBLAS preloaded (only at process start)
        return args.func(args)
    except (*EXPECTED, SystemExit) as e:
        if args.debug or (isinstance(e, SystemExit) and not isinstance(e.code, str)):
            raise
        print(f"jacrl: {_verb(args)}: {one_line(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
