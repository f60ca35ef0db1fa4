"""The learnable sanity family (`jacrl.tasks.learnable`): deterministic, built whole by the ordinary
build, a holdout on new names, numbers and combinations, and no holdout body near a train body."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import re
from pathlib import Path

import pytest

from jacrl.cli import learnable as learnable_cli
from jacrl.tasks import learnable as L
from jacrl.tasks import learnable_shapes as S
from jacrl.tasks.record import meta, read_tasks
from jacrl.tasks.splits import SplitConfig, load_split

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "learnable"
DATA = FOLDER / "data"


def cli(*argv: str) -> int:
    """`jacrl learnable ARGV` through the verb's own parser (its registration is one line in
    jacrl/cli/__init__.py)."""
    ap = argparse.ArgumentParser()
    learnable_cli.add(ap.add_subparsers())
    args = ap.parse_args(["learnable", *argv])
    return args.func(args)


@pytest.fixture(scope="module")
def programs():
    return L.generate()


@pytest.fixture(scope="module")
def split():
    return {name: load_split(name, DATA) for name in ("holdout", "trainpool", "valid")}


def test_same_seed_same_bytes_and_the_committed_family_is_it(programs, tmp_path):
    again = L.generate()
    assert [p.text for p in again] == [p.text for p in programs]
    assert [p.text for p in L.generate(1)] != [p.text for p in programs]
    assert L.check_drivers(FOLDER) == []  # learnable/drivers and manifest: what seed 0 makes
    L.write_drivers(again, tmp_path)
    (tmp_path / "drivers" / f"{programs[3].id}.jac").write_text("# edited\n")
    (tmp_path / "drivers" / "extra_one.jac").write_text("")
    diff = L.check_drivers(tmp_path)
    assert len(diff) == 2 and diff[0].startswith(f"{tmp_path}/drivers/{programs[3].id}.jac:1: ")
    assert cli("--check", "--out", str(tmp_path)) == 1
    assert cli("--check", "--out", str(FOLDER)) == 0


def test_shape_mix_and_sizes(programs):
    holdout = [p for p in programs if p.split == "holdout"]
    assert len(programs) == sum(L.TRAIN_PER_SHAPE.values()) + len(holdout) == 424
    assert len(holdout) == L.HOLDOUT_PER_SHAPE * len(L.SHAPES)
    assert len({p.id for p in programs}) == len(programs)
    assert len({p.body for p in programs if p.split == "train"}) == 360  # no repeated body
    # what a tiny model is given: every body short, every instruction free of double quotes
    assert max(len(p.body) for p in programs) < 200
    assert not any('"' in re.search(r'instruction="(.*)"', p.text).group(1) for p in programs)


def test_every_driver_passed_the_ordinary_build(programs):
    """The committed data is the whole family: the build writes nothing when any driver fails,
    and every task's gold is the generated body, its expected output differing from the empty
    body's."""
    tasks = {meta(t)["id"]: meta(t) for t in read_tasks(DATA / "tasks.jsonl")}
    assert set(tasks) == {p.id for p in programs}
    for p in programs:
        m = tasks[p.id]
        assert L.similarity(m["gold"], p.body) == 1.0
        assert m["expected_output"].strip() != (m["baseline_output"] or "").strip()
        assert m["family"] == p.family and m["source"] == p.source
        assert (DATA / "templates" / f"{p.id}.jac").is_file()


def test_a_sample_builds_for_real_and_a_broken_driver_is_named(programs, tmp_path):
    """One train program of every shape and the first holdout source go through the ordinary
    build (round trip under two seeds, gold and echoed driver 1.0, empty body fails) and split;
    a driver whose body does not parse is named with its file and line, and nothing is written."""
    sample = [next(p for p in programs if p.shape == s and p.split == "train") for s in L.SHAPES]
    sample += [p for p in programs if p.split == "holdout" and p.id.endswith("_h00")]
    r = L.build(tmp_path / "ok", programs=sample)
    assert (r["tasks"], r["holdout"], r["trainpool"] + r["valid"]) == (16, 8, 8)
    built = read_tasks(tmp_path / "ok" / "data" / "tasks.jsonl")
    assert all(json.loads(t["answer"])["baseline_output"] is not None for t in built)

    bad = sample[0]
    broken = dataclasses.replace(bad, text=bad.text.replace(bad.body, "return (;"))
    with pytest.raises(ValueError, match=rf"{bad.id}\.jac:\d+: driver does not run clean"):
        L.build(tmp_path / "bad", programs=[broken, *sample[1:]])
    assert not (tmp_path / "bad" / "data" / "tasks.jsonl").exists()


def test_holdout_is_file_disjoint_and_the_generated_one(programs, split):
    src = {name: {meta(t)["source"] for t in ts} for name, ts in split.items()}
    assert not src["holdout"] & (src["trainpool"] | src["valid"])
    held = {meta(t)["id"] for t in split["holdout"]}
    assert held == {p.id for p in programs if p.split == "holdout"}
    assert {meta(t)["family"] for t in split["holdout"]} == set(L.FAMILY.values())


SKELETON = set(
    "return if for in try except visit self here visitor f int float upper lower sum "
    "len max ValueError KeyError".split()
)


def _names(body: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", body)) - SKELETON


def test_holdout_needs_new_names_numbers_and_combinations(programs):
    for role, (train, hold) in S.POOLS.items():
        assert not set(train) & set(hold), role
    train = [p for p in programs if p.split == "train"]
    hold = [p for p in programs if p.split == "holdout"]
    assert not {n for p in train for n in _names(p.body)} & S.HOLD
    assert all(_names(p.body) and _names(p.body) <= S.HOLD for p in hold)
    nums = re.compile(r"(?<![\w.])\d+(?![\w.])")
    held_numbers = set(map(str, S.POOLS["number"][1]))
    assert not {n for p in train for n in nums.findall(p.body)} & held_numbers
    assert {n for p in hold for n in nums.findall(p.body)} <= held_numbers
    seen = {(p.shape, p.combo) for p in train}
    new = [p for p in hold if p.new_combo]
    assert len(new) == 4 * sum(bool(L.HOLD_ONLY[s]) for s in L.SHAPES)
    assert all((p.shape, p.combo) not in seen for p in new)
    assert all((p.shape, p.combo) in seen for p in hold if not p.new_combo)


def test_every_body_is_a_skeleton_plus_what_its_instruction_states(programs):
    """The copy design: every name and number of a body is in its instruction; what is not is
    the shape's fixed skeleton (a keyword or two)."""
    words = re.compile(r"[A-Za-z_]\w*|\d+")
    extra: dict[str, set[str]] = {}
    for p in programs:
        instr = re.search(r'instruction="(.*)"', p.text).group(1)
        extra.setdefault(p.shape, set()).update(
            set(words.findall(p.body)) - set(words.findall(instr))
        )
    assert extra == {
        "arith": {"return"},
        "method": {"return"},
        "text": {"return"},
        "filter": {"return"},
        "fold": {"return"},
        "walk": {"if"},
        "node": {"if"},
        "err": {"try", "except"},
    }


def test_every_name_is_one_jac_tiny_token_where_a_body_uses_it():
    """Copying a name is one in-context step: a GENERAL word is one token bare (after `[`, `{`)
    and after a space; a FIELD word after a dot (`self.value`) and after a space."""
    tokenizers = pytest.importorskip("tokenizers")
    tk = tokenizers.Tokenizer.from_file(str(ROOT / "models" / "jac-tiny" / "tokenizer.json"))

    def one(s: str) -> bool:
        return len(tk.encode(s).ids) == 1

    assert [w for w in S.GENERAL if not (one(w) and one(" " + w))] == []
    assert [w for w in S.FIELD if not (one("." + w) and one(" " + w))] == []
    assert len(S.HOLD) >= 30 and len(S.POOLS["name"][0]) >= 100


def test_no_holdout_body_near_a_train_body(split):
    """Below the split's decontamination threshold, measured as `jacrl.tasks.splits` measures it
    (the ordinary split dropped none: the holdout above is whole)."""
    limit = SplitConfig().decontam

    def gold(t):
        return "\n".join(ln.strip() for ln in meta(t)["gold"].strip().split("\n"))

    train = [gold(t) for t in split["trainpool"] + split["valid"]]
    worst = 0.0
    for t in split["holdout"]:
        sm = difflib.SequenceMatcher(None, "", gold(t), autojunk=False)
        for other in train:
            sm.set_seq1(other)
            if sm.real_quick_ratio() > worst and sm.quick_ratio() > worst:
                worst = max(worst, sm.ratio())
    assert 0.5 < worst < L.MARGIN < limit
