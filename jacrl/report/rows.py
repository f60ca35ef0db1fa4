"""Reading result rows: which ladder cell (model, rung, condition, kind) and task format a row
belongs to, the labels tables give them, and the orders tables sort by."""

from __future__ import annotations

import math
import os
from pathlib import Path

from jacrl.conditions import ORDER
from jacrl.results import read_rows
from jacrl.tasks.splits import RUNGS

COND_ORDER = ORDER  # jacrl.conditions' order is the display order
FORMAT_ORDER = ("hole", "conversion")
LINE = ("model", "rung", "condition", "kind", "format", "paired")  # a table line's key, in order


def line_fields(key: tuple) -> dict:
    """A line key (`latest_rows`', `seeds.seed_groups`') as its table columns."""
    return dict(zip(LINE, key, strict=True))


def load_rows(path: str | os.PathLike) -> list[dict]:
    """Rows of a results file ([] when it does not exist); a torn last line is skipped."""
    return read_rows(path) if Path(path).is_file() else []


def cell_of(row: dict) -> tuple[str, str, str, str] | None:
    """(model, rung, condition, kind) of a ladder row, or None for rows outside the ladder."""
    if all(row.get(f) for f in ("model_name", "rung", "condition", "kind")):
        return str(row["model_name"]), str(row["rung"]), str(row["condition"]), str(row["kind"])
    parts = str(row.get("tag", "")).split("/")
    if len(parts) != 4 or not parts[0].startswith("r"):
        return None
    rung, model, cond, kind = parts[0].lstrip("r"), parts[1], parts[2], parts[3]
    return model, rung, cond, kind


def format_of(row: dict) -> str:
    """The row's task format: its `format` field, `hole` for rows without one."""
    return str(row.get("format") or "hole")


def variant_of(row: dict) -> tuple[str, bool]:
    """(format, paired) of a row; a conversion row is always paired."""
    fmt = format_of(row)
    return fmt, fmt != "hole" or bool(row.get("paired"))


def condition_label(cond: str, fmt: str = "hole", paired: bool = False) -> str:
    """`sft` (hole-fill), `sft/hole` (hole-fill in a paired plan), `sft/conversion`."""
    return cond if fmt == "hole" and not paired else f"{cond}/{fmt}"


def _variant_rank(fmt: str, paired: bool) -> tuple[int, bool]:
    return (FORMAT_ORDER.index(fmt) if fmt in FORMAT_ORDER else len(FORMAT_ORDER)), paired


def _order(values, order) -> list:
    known = [v for v in order if v in values]
    return known + sorted(v for v in values if v not in order)


def latest_rows(rows) -> dict[tuple, dict]:
    """{(model, rung, condition, kind, format, paired): its last row} of the ladder rows."""
    latest: dict[tuple, dict] = {}
    for row in rows:
        c = cell_of(row)
        if c is not None:
            latest[(*c, *variant_of(row))] = row
    return latest


def ranked(df):
    """`df` (rung, condition, format, paired columns) with the sort keys of the table order: `_r`
    the rung's, `_c` the condition's, `_v` the variant's (hole, paired hole, conversion)."""
    rr = {r: i for i, r in enumerate(_order(set(df.rung), RUNGS))}
    cr = {c: i for i, c in enumerate(_order(set(df.condition), COND_ORDER))}
    return df.assign(
        _r=df.rung.map(rr),
        _c=df.condition.map(cr),
        _v=[_variant_rank(f, p) for f, p in zip(df.format, df.paired, strict=True)],
    )


def in_table_order(df):
    """A frame of ladder lines sorted model, rung order, condition order, format (hole, paired
    hole, conversion), kind: the order `frame` and the seed tables print in."""
    if df.empty:
        return df
    return (
        ranked(df)
        .sort_values(["model", "_r", "_c", "_v", "kind"])
        .drop(columns=["_r", "_c", "_v"])
        .reset_index(drop=True)
    )


def _passk(row: dict) -> tuple[float, int | None]:
    pk = row.get("pass_at_k") or {}
    if pk:
        k = max(int(x) for x in pk)
        return float(pk[str(k)]), k
    return math.nan, None
