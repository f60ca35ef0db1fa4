"""Corpus mining on real .jac trees with the real executor."""

from __future__ import annotations

from jacrl.ruler.drivers import parse_driver
from jacrl.tasks.mining import candidates, default_tree, inventory, write_drafts

PROGRAM = """node Stop { has name: str; }
walker Ride {
    has seen: list[str] = [];
    can start with Root entry { visit [-->]; }
    can step with Stop entry {
        self.seen.append(here.name);
        visit [-->];
    }
}
def shout(s: str) -> str {
    t = s.upper();
    return t + "!";
}
def unused(x: int) -> int {
    y = x + 1;
    return y;
}
with entry {
    root ++> Stop(name="a");
    print((root spawn Ride()).seen, shout("hi"));
}
"""


def test_inventory_of_a_tree(tmp_path):
    (tmp_path / "app.jac").write_text(PROGRAM)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "m.jac").write_text(
        "obj Box { has n: int = 0; def get() -> int { return self.n; } }\n"
    )
    df = inventory(tmp_path)
    assert set(df.kind) == {"node", "walker", "can", "def", "obj"}
    step = df[df.name == "step"].iloc[0]
    assert step.containers == "Ride" and step.visit == 1 and step.lines >= 2
    assert df[df.name == "get"].iloc[0].containers == "Box"


def test_default_tree_is_jaclang_bundled_sources():
    df = inventory(default_tree() / "jac0core")
    assert len(df) > 100 and {"def", "obj", "impl"} <= set(df.kind)


def test_candidates_keep_only_bodies_that_matter(tmp_path):
    (tmp_path / "app.jac").write_text(PROGRAM)
    (tmp_path / "lib.jac").write_text("def f() -> int { return 1; }\n")  # no entry: not runnable
    cands = candidates(tmp_path)
    names = sorted(c.name for c in cands)
    assert names == ["shout", "step"]  # `unused` does not change the output; `start` is 1 line
    paths = write_drafts(cands, tmp_path / "drafts")
    for p in paths:
        d = parse_driver(p)
        assert d.unit.name in ("shout", "step") and d.source == "mined/app.jac"
