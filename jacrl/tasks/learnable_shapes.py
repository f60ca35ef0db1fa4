"""The learnable family's shapes (`jacrl.tasks.learnable`): the pools its slots are drawn from
(train and holdout disjoint), the combinations each shape uses (some only in the holdout) and one
maker per shape that returns a driver's parts (head, unit with its {HOLE}, entry calls, instruction,
gold body).

Copy design (issue 24, second version): every shape's instruction states its body's varying part
literally (`Return self.field * count + 17.` -> `return self.field * count + 17;`), so a body is
a fixed, learnable skeleton plus spans copied from the prompt. Names are words that jac-tiny's
tokenizer encodes as ONE token where the body uses them (` word`, bare after `[` or `{`, `.word`
after `self.`/`here.`/`visitor.`), so copying a name is one in-context (induction) step; within
one copied span no token repeats where the next one would differ (distinct operators, one
`self.` per expression). Holdout names come from a disjoint word pool, holdout constants from a
disjoint number pool. Entry blocks write numbers without a space (`f(6,13)`), so a space before
a digit occurs in the prompt only where the instruction states a constant.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable

# -------------------------------------------------------------------------------------------
# pools: (train, holdout), disjoint
# -------------------------------------------------------------------------------------------


def _w(s: str) -> list[str]:
    return s.split()


# Words of 4+ letters that jac-tiny's tokenizer (models/jac-tiny/tokenizer.json) encodes as one
# token both bare and after a space (GENERAL), or after a space and after a dot (FIELD); no Jac or
# Python keyword or builtin, nothing a skeleton uses. A test re-checks every one. HOLD: the
# holdout's words (every fifth of the sorted union of the two lists), in no train pool.
GENERAL = _w(
    "access action agent align alloc anchor apply arch args assign attr back backend base body "
    "branch build cache call cast change check client code coerce collect comp compiled cond "
    "config conn connect const copy count current data decl defined desc direct dist edges elem "
    "emit enter entries error expr extract field file find form found func function handle head "
    "header helpers ident imported indent index info instance item items kind left level line "
    "link load local lookup loop main make member message method model module name native only "
    "order orig other over owner param parent parse part path place plugin point port prefix "
    "prev process project read register resolve resolved result right runtime section server "
    "shared size source state string struct table target text time token trans turn typed "
    "types under user valid value variant verb version view wrap write zero"
)
FIELD = _w(
    "access alias alloc arch args assign base body branch call check client close code command "
    "comp compiler condition config consume create current decl done emit enter error errors "
    "evaluator exists expr field find first func function getter group indent items kind last "
    "left line link load local make method name names orig param params parent parse parts path "
    "position proc prog program project read resolve right runtime shared signature source "
    "store struct symbol target text value values write"
)
_ALL = sorted(set(GENERAL) | set(FIELD))
HOLD = frozenset(_ALL[4::5])


def _split(words: list[str]) -> tuple[list[str], list[str]]:
    return [w for w in words if w not in HOLD], [w for w in words if w in HOLD]


_TRAIN_NUMBERS = [n for n in range(11, 100) if n % 5 != 3]
POOLS = {
    "name": _split(GENERAL),  # parameters, lists, list items, f-string slots and words
    "field": _split(FIELD),  # has-fields, read as self.<field>, here.<field>, visitor.<field>
    "type": (
        _w(
            "Crate Shelf Room Box Cart Tank Barn Dock Hall Desk Bin Tray Rack Cell Zone Gate "
            "Lane Pier Vault Shed"
        ),
        _w("Silo Kiosk Hangar Pod Locker Cabin"),
    ),
    "walker": (
        _w(
            "Weigher Counter Scout Tallier Runner Seeker Rover Crawler Surveyor Auditor "
            "Probe Ranger Tracker Sampler"
        ),
        _w("Prowler Drifter Censor Gauger Roamer"),
    ),
    "number": (_TRAIN_NUMBERS, [n for n in range(11, 100) if n % 5 == 3]),
}
PEOPLE = _w("ana ben cai dee eli fay gus hal ivy jon")  # string inputs in entry blocks only

OPS = ("+", "-", "*")
CMPS = (">", "<", ">=", "<=")
CMP_FN = {">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le}
FOLDS = ("sum", "len", "max")
ACCS = ("+=", "-=")  # a walker or node adds or takes off a field of the node it is at
CONDS = CMPS  # a walker's or node's step is always guarded (a bare step is too short a body)
XFORMS = ("none", "upper", "lower")

_OP_PAIRS = [f"{a},{b}" for a in OPS for b in OPS if a != b]  # distinct: no repeated token
# combinations only the holdout uses (each still appears in training in another shape)
HOLD_ONLY = {
    "arith": {"-,*", "*,-"},
    "method": {"+,-", "*,+"},
    "text": {"upper,last"},
    "filter": set(),
    "fold": {"len,<=", "max,<"},
    "walk": {"-=,<", "+=,>="},
    "node": {"+=,<", "-=,>="},
    "err": {"lookup,param"},
}
COMBOS = {
    "arith": _OP_PAIRS,
    "method": _OP_PAIRS,
    "text": [f"{x},{o}" for x in XFORMS for o in ("first", "last")],
    "filter": list(CMPS),
    "fold": [f"{f},{c}" for f in FOLDS for c in CMPS],
    "walk": [f"{a},{c}" for a in ACCS for c in CONDS],
    "node": [f"{a},{c}" for a in ACCS for c in CONDS],
    # a constant fallback only for the lookup: a conversion's is too short a body to tell apart
    "err": ["int,param", "float,param", "lookup,const", "lookup,param"],
}
FAMILY = {
    "arith": "lib",
    "method": "arch",
    "text": "text",
    "filter": "syn",
    "fold": "syn",
    "walk": "osp",
    "node": "osp",
    "err": "err",
}
SHAPES = tuple(FAMILY)
DOC = {
    "arith": "arithmetic over parameters",
    "method": "arithmetic over fields",
    "text": "an f-string from a template",
    "filter": "a list filter",
    "fold": "a filtered fold",
    "walk": "a walker along edges",
    "node": "a node ability feeding its visitor",
    "err": "a fallback on error",
}


class Draw:
    """Names and numbers for one program, from one side's pools, never repeating a name."""

    def __init__(self, rng: random.Random, side: int):
        self.rng, self.side, self.used = rng, side, set()

    def pick(self, role: str):
        pool = [x for x in POOLS[role][self.side] if x not in self.used]
        x = self.rng.choice(pool)
        if role != "number":
            self.used.add(x)
        return x

    def ints(self, n: int, lo: int = 1, hi: int = 60) -> list[int]:
        return [self.rng.randint(lo, hi) for _ in range(n)]


def _args(*xs) -> str:
    """Call arguments without spaces: digits after a space are the instruction's only."""
    return ",".join(map(str, xs))


# -------------------------------------------------------------------------------------------
# shapes: each returns (header lines, unit lines with "{HOLE}", entry lines, instruction, body)
# -------------------------------------------------------------------------------------------


def _arith(d: Draw, combo: str):
    o1, o2 = combo.split(",")
    fn, a, b = d.pick("name"), d.pick("name"), d.pick("name")
    expr = f"{a} {o1} {b} {o2} {d.pick('number')}"
    unit = [f"def {fn}({a}: int, {b}: int) -> int {{", "{HOLE}", "}"]
    calls = [f"    print({fn}({_args(x, y)}));" for x, y in zip(d.ints(3), d.ints(3), strict=True)]
    return [], unit, calls, f"Return {expr}.", [f"return {expr};"]


def _method(d: Draw, combo: str):
    o1, o2 = combo.split(",")
    t, f, fn, k = d.pick("type"), d.pick("field"), d.pick("name"), d.pick("name")
    expr = f"self.{f} {o1} {k} {o2} {d.pick('number')}"
    unit = [
        f"obj {t} {{",
        f"    has {f}: int;",
        "",
        f"    def {fn}({k}: int) -> int {{",
        "{HOLE}",
        "    }",
        "}",
    ]
    calls = [
        f"    print({t}({f}={x}).{fn}({y}));" for x, y in zip(d.ints(3), d.ints(3), strict=True)
    ]
    return [], unit, calls, f"Return {expr}.", [f"return {expr};"]


def _text(d: Draw, combo: str):
    xform, order = combo.split(",")
    fn, p = d.pick("name"), d.pick("name")
    words = " ".join(d.pick("name") for _ in range(3))
    slot = "{" + (p if xform == "none" else f"{p}.{xform}()") + "}"
    fstr = f"f'{slot} {words}'" if order == "first" else f"f'{words} {slot}'"
    unit = [f"def {fn}({p}: str) -> str {{", "{HOLE}", "}"]
    calls = [
        f'    print({fn}("{w.title() if i == 1 else w}"));'
        for i, w in enumerate(d.rng.sample(PEOPLE, 3))
    ]
    return [], unit, calls, f"Return {fstr} as text.", [f"return {fstr};"]


def _cond_values(d: Draw, op: str, n: int, k: int) -> list[int]:
    """k values with at least one that passes `x op n` and one that does not."""
    while True:
        xs = d.ints(k, 1, 110)
        ok = [CMP_FN[op](x, n) for x in xs]
        if any(ok) and not all(ok):
            return xs


def _list_fn(d: Draw, op: str, returns: str):
    """(comprehension, unit, calls) of a function over a list of ints whose body keeps the items
    that pass `op` against a constant: the filter's and the fold's shared frame."""
    fn, xs, v, n = d.pick("name"), d.pick("name"), d.pick("name"), d.pick("number")
    unit = [f"def {fn}({xs}: list[int]) -> {returns} {{", "{HOLE}", "}"]
    calls = [f"    print({fn}([{_args(*_cond_values(d, op, n, 5))}]));" for _ in range(3)]
    return f"[{v} for {v} in {xs} if {v} {op} {n}]", unit, calls


def _filter(d: Draw, combo: str):
    comp, unit, calls = _list_fn(d, combo, "list[int]")
    return [], unit, calls, f"Return {comp}.", [f"return {comp};"]


def _fold(d: Draw, combo: str):
    fold, op = combo.split(",")
    comp, unit, calls = _list_fn(d, op, "int")
    return [], unit, calls, f"Return {fold}({comp}).", [f"return {fold}({comp});"]


def _graph(d: Draw, t: str, f: str, g: str, op: str, n: int) -> list[str]:
    """Entry lines: a chain of nodes under root (f values passing and failing the condition)."""
    xs = _cond_values(d, op, n, 4)
    lines = [
        f"    {v} = {t}({f}={x},{g}={y});" for v, x, y in zip("abcd", xs, d.ints(4), strict=True)
    ]
    return lines + ["    root ++> a;", "    a ++> b;", "    b ++> c;", "    b ++> d;"]


def _guarded(step: str, cond: str, subject: str, f: str, n: int) -> tuple[list[str], str]:
    """(body lines, instruction words): `step`, guarded by `subject.f cond n`."""
    guard = f"{subject}.{f} {cond} {n}"
    return [f"if {guard} {{", f"    {step}", "}"], f"If {guard}, do {step}"


def _walk(d: Draw, combo: str):
    acc, cond = combo.split(",")
    t, w, f, a = d.pick("type"), d.pick("walker"), d.pick("field"), d.pick("field")
    g, n = d.pick("field"), d.pick("number")
    step = f"self.{a} {acc} here.{g};"
    body, words = _guarded(step, cond, "here", f, n)
    head = [f"node {t} {{", f"    has {f}: int;", f"    has {g}: int;", "}", ""]
    unit = [
        f"walker {w} {{",
        f"    has {a}: int = 0;",
        "",
        "    can start with Root entry {",
        "        visit [-->];",
        "    }",
        "",
        f"    can step with {t} entry {{",
        "{HOLE}",
        "    }",
        "}",
    ]
    calls = _graph(d, t, f, g, cond, n) + [f"    print((root spawn {w}()).{a});"]
    return head, unit, calls, f"{words} then visit [-->];", body + ["visit [-->];"]


def _node(d: Draw, combo: str):
    acc, cond = combo.split(",")
    t, w, f, a = d.pick("type"), d.pick("walker"), d.pick("field"), d.pick("field")
    g, n = d.pick("field"), d.pick("number")
    step = f"visitor.{a} {acc} self.{g};"
    body, words = _guarded(step, cond, "self", f, n)
    unit = [
        f"node {t} {{",
        f"    has {f}: int;",
        f"    has {g}: int;",
        "",
        f"    can feed with {w} entry {{",
        "{HOLE}",
        "    }",
        "}",
    ]
    tail = [
        f"walker {w} {{",
        f"    has {a}: int = 0;",
        "",
        "    can start with Root entry {",
        "        visit [-->];",
        "    }",
        "",
        f"    can step with {t} entry {{",
        "        visit [-->];",
        "    }",
        "}",
    ]
    calls = _graph(d, t, f, g, cond, n) + [f"    print((root spawn {w}()).{a});"]
    return [], unit + [""] + tail, calls, f"Node side: {words}", body


def _err(d: Draw, combo: str):
    """A conversion (or lookup) combined with a parameter, and a fallback when it raises."""
    kind, fallback = combo.split(",")
    ret = "float" if kind == "float" else "int"
    fn, m = d.pick("name"), d.pick("name")
    op = f"{d.rng.choice(_OP_PAIRS).replace(',', f' {m} ')} {d.pick('number')}"
    extra = f", {m}: int"
    if fallback == "param":
        dflt = d.pick("name")
        extra += f", {dflt}: {ret}"
    else:
        dflt = f"-{d.pick('number')}" + (".5" if kind == "float" else "")

    def args() -> str:
        tail = f",{d.ints(1, 1, 9)[0]}{'.5' * (kind == 'float')}" if fallback == "param" else ""
        return f",{d.ints(1, 2, 9)[0]}{tail}"

    if kind == "lookup":
        tb, k = d.pick("name"), d.pick("name")
        unit = [f"def {fn}({tb}: dict[str, int], {k}: str{extra}) -> int {{", "{HOLE}", "}"]
        keys = d.rng.sample(PEOPLE, 3)
        table = "{" + ",".join(f'"{x}":{v}' for x, v in zip(keys, d.ints(3), strict=True)) + "}"
        calls = [f"    {tb} = {table};"] + [
            f'    print({fn}({tb},"{x}"{args()}));' for x in (keys[0], "zed", keys[2])
        ]
        expr, exc = f"{tb}[{k}] {op}", "KeyError"
    else:
        tx = d.pick("name")
        unit = [f"def {fn}({tx}: str{extra}) -> {ret} {{", "{HOLE}", "}"]
        good = [str(x) if kind == "int" else f"{x}.25" for x in d.ints(2)]
        calls = [f'    print({fn}("{x}"{args()}));' for x in (good[0], "n/a", good[1])]
        expr, exc = f"{kind}({tx}) {op}", "ValueError"
    body = ["try {", f"    return {expr};", f"}} except {exc} {{", f"    return {dflt};", "}"]
    return [], unit, calls, f"Try return {expr}; on {exc} return {dflt}.", body


MAKERS: dict[str, Callable] = {
    "arith": _arith,
    "method": _method,
    "text": _text,
    "filter": _filter,
    "fold": _fold,
    "walk": _walk,
    "node": _node,
    "err": _err,
}
