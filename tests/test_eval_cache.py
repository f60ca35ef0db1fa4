"""An evaluation made once (jacrl.ladder.eval_cache): a base cell's gen row at a second rung is
the first rung's evaluation, taken from the cache (its row and samples, retagged) without
decoding again; any input that decides a row (tasks, settings, adapter) is another key."""

from __future__ import annotations

import gzip

from jacrl import ladder
from jacrl.config import EvalConfig
from jacrl.ladder import cell as cell_mod
from jacrl.ladder.eval_cache import eval_key


def test_a_base_cells_gen_row_is_made_once_across_rungs(tiny, data_dir, tmp_path, monkeypatch):
    calls = []
    real = cell_mod.evaluate

    def counting(*args, **kw):
        calls.append(kw["tag"])
        return real(*args, **kw)

    monkeypatch.setattr(cell_mod, "evaluate", counting)
    kw = {
        "model": tiny,
        "data_dir": data_dir,
        "gen_limit": 2,
        "mem_limit": 0,  # every rung task: rung 3's mem is not rung 1's
        "results_dir": str(tmp_path / "results"),
        "artifacts_dir": str(tmp_path / "artifacts"),
        "n": 2,
        "k": "1,2",
        "max_tokens": 12,
        "env": {},
    }
    first = ladder.evaluate_cell(ladder.notebook_cell(condition="base", rung="1", **kw), {})
    second = ladder.evaluate_cell(ladder.notebook_cell(condition="base", rung="3", **kw), {})
    # gen decoded once (rung 1's); each rung's mem (other tasks) decoded for itself
    assert calls == ["r1/jac-tiny/base/gen", "r1/jac-tiny/base/mem", "r3/jac-tiny/base/mem"]
    g1, g2 = first[0], second[0]
    assert g2["eval_reused"] and "eval_reused" not in g1
    assert (
        g2["tag"] == "r3/jac-tiny/base/gen"
        and g2["rung"] == "3"
        and g2["cell_key"] != g1["cell_key"]
    )
    skip = {"tag", "eval_reused", "samples", "cell_key", "rung", "ladder", "training"}
    assert {k: v for k, v in g2.items() if k not in skip} == {
        k: v for k, v in g1.items() if k not in skip
    }
    # the samples behind the reused row are there, under the second cell, byte for byte
    results = tmp_path / "results"
    one, two = results / g1["samples"], results / g2["samples"]
    assert one != two and gzip.decompress(two.read_bytes()) == gzip.decompress(one.read_bytes())
    assert second[1].get("eval_reused") is None  # mem: other tasks, decoded


def test_every_input_of_an_evaluation_is_in_its_key(tiny, data_dir):
    from jacrl.tasks.splits import load_split

    tasks = load_split("holdout", data_dir)[:3]
    cfg = EvalConfig(n=2, k=(1, 2), max_tokens=12)
    base = eval_key(tiny, None, tasks, cfg, "gen", "holdout")
    assert base == eval_key(tiny, None, [dict(t) for t in tasks], cfg, "gen", "holdout")
    others = [
        eval_key(tiny, None, tasks[:2], cfg, "gen", "holdout"),
        eval_key(tiny, None, tasks, EvalConfig(n=2, k=(1, 2), max_tokens=13), "gen", "holdout"),
        eval_key(
            tiny, None, tasks, EvalConfig(n=2, k=(1, 2), max_tokens=12, seed=1), "gen", "holdout"
        ),
        eval_key(tiny, None, tasks, cfg, "mem", "rung"),
    ]
    assert len({base, *others}) == 5


def test_two_artifacts_with_equal_weights_keep_their_own_rows(tiny, data_dir, tmp_path):
    """A GRPO run without signal leaves its parent's weights: the same weights, another
    artifact. Its evaluation is its own (a row names its artifact), so the keys differ."""
    from jacrl.provenance import adapter_weights_hash
    from jacrl.tasks.splits import load_split

    tasks = load_split("holdout", data_dir)[:2]
    cfg = EvalConfig(n=0, k=(1,), max_tokens=12)
    dirs = []
    for name in ("sft", "sft_grpo"):
        d = tmp_path / name
        d.mkdir()
        (d / "adapter_config.json").write_text('{"num_layers": 1}')
        (d / "adapters.safetensors").write_bytes(b"same weights")
        (d / "manifest.json").write_text(f'{{"key": "{name}-key"}}')
        dirs.append(d)
    assert adapter_weights_hash(dirs[0]) == adapter_weights_hash(dirs[1])  # the premise
    keys = {eval_key(tiny, d, tasks, cfg, "gen", "holdout") for d in dirs}
    assert len(keys) == 2


def test_an_entry_missing_its_samples_is_made_again(tmp_path):
    """A kept row that names samples no longer beside it (a disk cleaned by hand, an entry
    copied without them) is a miss: the evaluation runs again and the entry is remade, so a
    reused row never points at another cell's samples or at nothing."""
    import json

    from jacrl.ladder.eval_cache import cached

    root, runs = tmp_path / "evals", []

    def run(cell):
        def make():
            runs.append(cell)
            out = tmp_path / cell / "samples-gen.jsonl.gz"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(gzip.compress(cell.encode()))
            return {"pass1": 1, "samples": str(out)}

        return make

    target = lambda cell: tmp_path / cell / "samples-gen.jsonl.gz"  # noqa: E731
    row, reused = cached(root, "k", target("a"), run("a"), "a/gen")
    assert not reused and runs == ["a"]
    row, reused = cached(root, "k", target("b"), run("b"), "b/gen")
    assert reused and runs == ["a"] and row["samples"] == str(target("b"))
    assert gzip.decompress(target("b").read_bytes()) == b"a"  # a's samples, copied beside b
    (root / "k" / "samples-gen.jsonl.gz").unlink()
    row, reused = cached(root, "k", target("c"), run("c"), "c/gen")
    assert not reused and runs == ["a", "c"] and row["samples"] == str(target("c"))
    assert (root / "k" / "samples-gen.jsonl.gz").is_file()  # the entry is whole again
    (root / "k" / "row.json").write_text("{not json")
    row, reused = cached(root, "k", target("d"), run("d"), "d/gen")
    assert not reused and runs == ["a", "c", "d"]
    assert json.loads((root / "k" / "row.json").read_text())["samples"] == str(target("d"))


def test_the_blas_library_preloaded_is_in_the_key(tiny, data_dir, monkeypatch):
    """Sampled rows differ between BLAS kernels: another preloaded library is another key."""
    from jacrl.tasks.splits import load_split

    tasks = load_split("holdout", data_dir)[:2]
    cfg = EvalConfig(n=2, k=(1, 2), max_tokens=12)
    keys = set()
    for blas in ("", "/usr/lib/a/libopenblas.so", "/usr/lib/b/libopenblas.so"):
        monkeypatch.setenv("LD_PRELOAD", blas)
        keys.add(eval_key(tiny, None, tasks, cfg, "gen", "holdout"))
    assert len(keys) == 3


def test_an_entry_is_made_under_the_cache_root_and_reused_into_an_existing_folder(
    tmp_path, monkeypatch
):
    """The entry is built in a temporary folder under the cache's own root and renamed into
    place (a folder in the system's temp dir could sit on another filesystem, where the rename
    fails and nothing would ever be kept: here the system temp dir does not exist at all); a
    reuse copies the samples into a cell folder that already exists."""
    import tempfile

    from jacrl.ladder.eval_cache import cached

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-temp-dir"))
    root = tmp_path / "evals"
    first = tmp_path / "a" / "samples-gen.jsonl.gz"

    def make():
        first.parent.mkdir(parents=True)
        first.write_bytes(gzip.compress(b"a"))
        return {"pass1": 1, "samples": str(first)}

    _, reused = cached(root, "k", first, make, "a/gen")
    assert not reused and (root / "k" / "row.json").is_file()
    assert [p.name for p in root.iterdir()] == ["k"]  # no temporary folder left beside it
    second = tmp_path / "b" / "samples-gen.jsonl.gz"
    second.parent.mkdir()
    (second.parent / "log.txt").write_text("the cell's own files")
    row, reused = cached(root, "k", second, make, "b/gen")
    assert reused and row["samples"] == str(second) and row["tag"] == "b/gen"
    assert gzip.decompress(second.read_bytes()) == b"a"
    assert (second.parent / "log.txt").read_text() == "the cell's own files"
