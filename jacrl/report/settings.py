"""The settings a row was made with, so that `ladder show` never mixes them silently: a row's
evaluation settings (`n`, `k`, `temperature`, `max_tokens`, `gen_limit`, `mem_limit`: its
`ladder.eval`, else its own fields) and each training stage's (`sft.iters`, `grpo.group_size`, …:
its `ladder.<stage>`), flat (`settings_of`); rows picked by them (`where_rows`, `--where
KEY=VALUE`); and the lines that flag a cell whose rows were made with other settings, or a table
whose cells were evaluated with other settings (`mixed_lines`).

Seeds (`seed`, `train_seed`, a stage's `seed`) are settings one can pick by, but never "other
settings": rows that differ only in them are replicates (`jacrl.report.seeds`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from jacrl.report.rows import cell_of, condition_label, variant_of
from jacrl.stages import STAGES

EVAL_KEYS = ("n", "k", "temperature", "max_tokens", "gen_limit", "mem_limit")
ROW_SEEDS = ("seed", "train_seed")  # the row's own fields: evaluation and training seeds


def settings_of(row: Mapping) -> dict[str, object]:
    """{setting: value} of a row: its evaluation's under their own names, each training stage's
    as `stage.field`, and its seeds. Rows without a `ladder` dict (the reference harness's) have
    the evaluation fields they carry."""
    lad = row.get("ladder") or {}
    ev = lad.get("eval") or {k: row[k] for k in EVAL_KEYS if row.get(k) is not None}
    out: dict[str, object] = dict(ev)
    for stage in STAGES:
        if isinstance(lad.get(stage), dict):
            out.update({f"{stage}.{k}": v for k, v in lad[stage].items()})
    out.update({k: row[k] for k in ROW_SEEDS if row.get(k) is not None})
    return out


def is_seed(key: str) -> bool:
    return key in ROW_SEEDS or key.endswith(".seed")


def shown(value: object) -> str:
    """A setting's value as the flag lines and --where write it: 1,2,4 for a list, 0.0002 for a
    float."""
    if isinstance(value, (list, tuple)):
        return ",".join(shown(v) for v in value)
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def _equal(value: object, want: str) -> bool:
    """Whether a setting's value is the --where value: numbers as numbers (1 = 1.0, 2e-4 =
    0.0002), lists item by item, anything else as written (case-blind)."""
    if isinstance(value, (list, tuple)):
        parts = want.split(",")
        return len(parts) == len(value) and all(
            _equal(v, p) for v, p in zip(value, parts, strict=True)
        )
    if not isinstance(value, bool):
        try:
            return math.isclose(float(value), float(want), rel_tol=1e-9)
        except (TypeError, ValueError):
            pass
    return shown(value).lower() == want.strip().lower()


def parse_where(items: Sequence[str]) -> dict[str, list[str]]:
    """['n=8', 'sft.iters=100', 'n=4'] -> {'n': ['8', '4'], 'sft.iters': ['100']}; `eval.n` is
    `n`."""
    out: dict[str, list[str]] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip().removeprefix("eval.")
        if not eq or not key or not value.strip():
            raise ValueError(f"--where expects KEY=VALUE (e.g. n=8, sft.iters=100), got {item!r}")
        out.setdefault(key, []).append(value.strip())
    return out


def _keeps(settings: Mapping[str, object], key: str, wants: list[str]) -> bool:
    """A stage's key picks among the rows that ran that stage (base has no sft: kept)."""
    stage = key.partition(".")[0] if "." in key else ""
    if stage and not any(k.startswith(stage + ".") for k in settings):
        return True
    return key in settings and any(_equal(settings[key], w) for w in wants)


def where_text(where: Sequence[str]) -> str:
    return ", ".join(f"{k}={'|'.join(v)}" for k, v in parse_where(where).items())


def where_folder(where: Sequence[str]) -> str:
    """The folder name that says a figure's filter, e.g. `where-n=8_sft.iters=100`: filtered
    figures go there, never over the figures of all the rows."""
    parts = (f"{k}={'+'.join(v)}" for k, v in sorted(parse_where(where).items()))
    return "where-" + re.sub(r"[^\w.=+,-]", "-", "_".join(parts))


def _ordered(values: set[str]) -> list[str]:
    try:
        return sorted(values, key=float)
    except ValueError:  # not all numbers
        return sorted(values)


def _known_text(known: set[str]) -> str:
    """The settings rows have, for an error: the evaluation's and seeds by name, the stages'."""
    names = [k for k in EVAL_KEYS + ROW_SEEDS if k in known]
    stages = sorted({k.partition(".")[0] for k in known if "." in k})
    eg = next((s for s in STAGES if s in stages), stages[0] if stages else "")  # table order
    return ", ".join(names) + (
        f" and STAGE.FIELD of {', '.join(stages)}, e.g. {eg}.iters" if stages else ""
    )


def where_rows(rows: list[dict], where: Sequence[str]) -> list[dict]:
    """The rows whose settings match every KEY=VALUE of `where` (a key given twice: either
    value). An unknown key, or one that leaves no row, is an error naming what there is."""
    conds = parse_where(where)
    if not conds:
        return rows
    every = [settings_of(r) for r in rows]
    known = {k for s in every for k in s}
    for key in conds:
        if key not in known:
            raise ValueError(
                f"--where {key}: no row has that setting (rows have {_known_text(known)})"
            )
    kept = [
        r
        for r, s in zip(rows, every, strict=True)
        if all(_keeps(s, k, w) for k, w in conds.items())
    ]
    if not kept:
        have = "; ".join(
            f"{k} = {', '.join(_ordered({shown(s[k]) for s in every if k in s}))}" for k in conds
        )
        raise ValueError(f"no row where {where_text(where)} (rows have {have})")
    return kept


def _differing(settings: Sequence[Mapping[str, object]]) -> dict[str, list[str]]:
    """{key: its distinct values, in row order} of the keys (seeds aside) that differ."""
    keys = sorted({k for s in settings for k in s if not is_seed(k)})
    out = {}
    for k in keys:
        values = list(dict.fromkeys(shown(s.get(k, "—")) for s in settings))
        if len(values) > 1:
            out[k] = values
    return out


def _cells(rows: Iterable[dict]) -> dict[tuple, list[dict]]:
    """{(model, rung, condition, kind, format, paired): its rows in file order}."""
    out: dict[tuple, list[dict]] = {}
    for row in rows:
        c = cell_of(row)
        if c is not None:
            out.setdefault((*c, *variant_of(row)), []).append(row)
    return out


def _diff_text(diff: Mapping[str, list[str]]) -> str:
    return "; ".join(f"{k} {' | '.join(v)}" for k, v in diff.items())


def mixed_lines(rows: list[dict]) -> list[str]:
    """What `ladder show` says about mixed settings: one line per cell whose rows differ in
    settings (seeds aside), naming what differs and what the table shows, and one line when the
    cells the table shows were evaluated with other settings. [] when nothing is mixed."""
    cells = _cells(rows)
    lines = []
    for (model, rung, cond, kind, fmt, paired), rs in cells.items():
        diff = _differing([settings_of(r) for r in rs])
        if diff:
            last = settings_of(rs[-1])
            lines.append(
                f"  r{rung} {model} {condition_label(cond, fmt, paired)} {kind}: "
                f"{len(rs)} rows, {_diff_text(diff)} — shown: "
                + ", ".join(f"{k}={shown(last.get(k, '—'))}" for k in diff)
            )
    evals = _differing(
        [{k: v for k, v in settings_of(rs[-1]).items() if k in EVAL_KEYS} for rs in cells.values()]
    )
    if evals:
        lines.append(f"  the table's cells were evaluated with other settings: {_diff_text(evals)}")
    if not lines:
        return []
    return [
        "rows made with other settings (the table shows each cell's last row, or its "
        "seeds' mean; `ladder show --where KEY=VALUE` picks, e.g. --where n=8):",
        *lines,
    ]


def settings_parts(rows: list[dict], where: Sequence[str], total: int) -> list[str]:
    """`show_text`'s lines on settings, after a blank line: which rows `where` kept (of `total`),
    and `mixed_lines`; [] when there is nothing to say."""
    picked = [f"rows where {where_text(where)}: {len(rows)} of {total} shown"] if where else []
    said = picked + mixed_lines(rows)
    return ["", *said] if said else []
