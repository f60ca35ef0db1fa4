"""`jacrl ladder show` never mixes rows made with other settings silently: a cell whose rows
differ in evaluation or training settings is flagged with what differs, `--where KEY=VALUE` picks
rows by them (table and figures), and a `--results` that is not a results folder or a rows file
is one line. Rows are real ones from results/rl_ladder.jsonl, copied with their settings
changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jacrl import ladder, report
from jacrl.cli import main

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results" / "rl_ladder.jsonl"


def _rows() -> list[dict]:
    return [json.loads(line) for line in COMMITTED.read_text().splitlines() if line.strip()]


def _other_settings(row: dict, n: int = 8, iters: int = 100) -> dict:
    """A copy of a real row as if its cell had been run again with n samples and SFT iters."""
    r = json.loads(json.dumps(row))
    r["ladder"]["eval"]["n"] = n
    r["ladder"]["sft"]["iters"] = iters
    r["cell_key"] += f"-n{n}-i{iters}"
    return r


def _r1_sft(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["rung"] == "1" and r["condition"] == "sft"]


def _results(tmp_path: Path, rows: list[dict]) -> Path:
    res = tmp_path / "results"
    res.mkdir(exist_ok=True)
    (res / ladder.RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return res


def _one_line_error(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def test_a_rows_settings_are_its_evaluations_and_its_stages():
    rows = _rows()
    sft = next(r for r in rows if r["condition"] == "sft" and r["rung"] == "1")
    s = report.settings_of(sft)
    assert {k: s[k] for k in ("n", "k", "temperature", "max_tokens", "gen_limit")} == {
        "n": 4,
        "k": [1, 2, 4],
        "temperature": 1.0,
        "max_tokens": 256,
        "gen_limit": 6,
    }
    assert s["sft.iters"] == 90 and not any(k.startswith("grpo.") for k in s)
    base = report.settings_of(next(r for r in rows if r["condition"] == "base"))
    assert not any("." in k for k in base)
    grpo = report.settings_of(next(r for r in rows if r["condition"] == "sft_grpo"))
    assert grpo["grpo.iters"] == 8 and grpo["sft.iters"] == 90


def test_a_cell_whose_rows_differ_in_settings_is_flagged():
    rows = _rows()
    mixed = rows + [_other_settings(r) for r in _r1_sft(rows)]
    text = report.show_text(mixed, include_stale=True)
    lines = text.splitlines()
    assert any(ln.startswith("rows made with other settings") for ln in lines), text
    for kind in ("gen", "mem"):
        assert (
            f"  r1 jac-tiny sft {kind}: 2 rows, n 4 | 8; sft.iters 90 | 100 — shown: n=8, "
            "sft.iters=100"
        ) in lines
    assert "  the table's cells were evaluated with other settings: n 4 | 8" in lines
    assert "rows made with other settings" not in report.show_text(rows, include_stale=True)


def test_rows_that_differ_only_in_their_seeds_are_not_other_settings():
    rows = _rows()
    reseeded = []
    for r in _r1_sft(rows):
        r = json.loads(json.dumps(r))
        r["train_seed"], r["ladder"]["sft"]["seed"] = 1, 1
        r["cell_key"] += "-seed1"
        reseeded.append(r)
    assert report.mixed_lines(rows + reseeded) == []
    assert report.where_rows(rows + reseeded, ["train_seed=1"]) == reseeded


def test_where_picks_the_rows_of_the_table_and_the_figures(tmp_path, capsys):
    rows = _rows()
    res = _results(tmp_path, rows + [_other_settings(r) for r in _r1_sft(rows)])
    fig = tmp_path / "fig"
    show = ["ladder", "show", "--results", str(res), "--include-stale", "--figures", str(fig)]
    assert main([*show, "--where", "n=8"]) == 0
    out = capsys.readouterr().out
    assert f"rows where n=8: 2 of {len(rows) + 2} shown" in out
    assert "rows made with other settings" not in out
    # the filtered figures go to a folder that says the filter, their stamp records it, and the
    # figures of all the rows (none drawn here yet) are not written over
    sub = fig / "where-n=8"
    assert report.read_stamp(sub / "ladder.png")["drawn_rows"] == 2  # the figures' rows too
    assert report.read_stamp(sub / "ladder.svg")["sources"][0]["where"] == ["n=8"]
    assert not (fig / "ladder.png").exists()
    assert report.where_folder(["sft.iters=100", "n=8", "n=4"]) == "where-n=8+4_sft.iters=100"
    # sft.iters picks among the rows that ran SFT: base and raw_grpo stay; rung 3's SFT ran 270
    assert main([*show, "--where", "sft.iters=90", "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert f"rows where sft.iters=90: {len(rows) - 4} of {len(rows) + 2} shown" in out
    assert "rows made with other settings" not in out
    # a key twice: either value; numbers as numbers; eval.n is n
    picked = report.where_rows(
        rows, ["sft.iters=90", "sft.iters=270", "temperature=1", "eval.n=4.0", "k=1,2,4"]
    )
    assert picked == rows


def test_where_mistakes_are_one_line_errors(tmp_path, capsys):
    res = _results(tmp_path, _rows())
    show = ["ladder", "show", "--results", str(res), "--no-figures", "--include-stale"]
    err = _one_line_error(capsys, *show, "--where", "samples=8")
    assert err.startswith(
        "jacrl: ladder show: --where samples: no row has that setting (rows "
        "have n, k, temperature, max_tokens, gen_limit, mem_limit, seed"
    )
    assert "e.g. sft.iters" in err
    assert _one_line_error(capsys, *show, "--where", "n=3", "--where", "sft.iters=5") == (
        "jacrl: ladder show: no row where n=3, sft.iters=5 (rows have n = 4; sft.iters = 90, 270)"
    )
    assert _one_line_error(capsys, *show, "--where", "n") == (
        "jacrl: ladder show: --where expects KEY=VALUE (e.g. n=8, sft.iters=100), got 'n'"
    )


WANT = (
    "expected the results folder that holds rl_ladder.jsonl (as `jacrl ladder run --results "
    "DIR` writes it), or a rows file"
)


@pytest.mark.parametrize("content", ["hello\n", "a,b\n1,2\n", "\x89PNG\x00\x01\x02", "[1, 2]\n"])
def test_results_that_is_not_rows_is_one_line(tmp_path, capsys, content):
    bad = tmp_path / "table.csv"
    bad.write_text(content)
    assert _one_line_error(capsys, "ladder", "show", "--results", str(bad)) == (
        f"jacrl: ladder show: --results {bad}: table.csv is not a rows file (no line of it is a "
        f"JSON object); {WANT}"
    )
    folder = tmp_path / "res"
    folder.mkdir()
    (folder / ladder.RESULTS_FILE).write_text(content)  # the folder is right, its file is not
    assert _one_line_error(capsys, "ladder", "show", "--results", str(folder)) == (
        f"jacrl: ladder show: --results {folder}: rl_ladder.jsonl is not a rows file (no line "
        f"of it is a JSON object); {WANT}"
    )


def test_results_that_is_missing_is_one_line_and_a_rows_file_is_read(tmp_path, capsys):
    gone = tmp_path / "no-such"
    assert _one_line_error(capsys, "ladder", "show", "--results", str(gone)) == (
        f"jacrl: ladder show: --results {gone}: no such file or folder; {WANT}"
    )
    res = _results(tmp_path, _rows())
    named = tmp_path / "copy.jsonl"  # a rows file of any name, given itself
    named.write_text((res / ladder.RESULTS_FILE).read_text())
    for given in (res, res / ladder.RESULTS_FILE, named):
        capsys.readouterr()
        assert (
            main(["ladder", "show", "--results", str(given), "--no-figures", "--include-stale"])
            == 0
        )
        assert "jac-tiny" in capsys.readouterr().out


def test_show_of_other_results_draws_beside_them_not_over_the_projects(tmp_path, capsys):
    """`ladder show --results DIR` without --figures writes DIR/figures/: another run's rows
    never overwrite the project's tracked figures."""
    res = _results(tmp_path, _rows())
    before = {p.name: p.read_bytes() for p in (ROOT / "figures").iterdir()}
    assert main(["ladder", "show", "--results", str(res), "--include-stale"]) == 0
    assert f"wrote {res / 'figures' / 'ladder.png'}" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in (ROOT / "figures").iterdir()} == before
