"""The learnable family's shapes (`jacrl.learnable`): the pools its slots are drawn from (train
and holdout disjoint), the combinations each shape uses (some only in the holdout) and one maker
per shape that returns a driver's parts (head, unit with its {HOLE}, entry calls, instruction,
gold body)."""

from __future__ import annotations

import operator
import random
from collections.abc import Callable

# -------------------------------------------------------------------------------------------
# pools: (train, holdout), disjoint
# -------------------------------------------------------------------------------------------

def _w(s: str) -> list[str]:
    return s.split()


POOLS = {
    "int": (_w("width height depth count price rate base bonus level speed weight length amount "
               "margin limit offset score stock budget salary tax fee cost size age year hour "
               "minute rent deposit"),
            _w("quota reward ration volume thrust ounce radius altitude pulse torque")),
    "plural": (_w("scores prices ages weights marks steps sizes levels ranks votes bids fees laps "
                  "pages miles hours days coins points seats tips wins loads rates doses heights "
                  "widths gains costs lengths"),
               _w("grades tolls jumps beats dips bets kicks rolls yards rings")),
    "verb": (_w("calc get make find compute build pick eval"), _w("derive gather obtain")),
    "type": (_w("Crate Shelf Room Box Cart Tank Barn Dock Hall Desk Bin Tray Rack Cell Zone Gate "
                "Lane Pier Vault Shed"),
             _w("Silo Kiosk Hangar Pod Locker Cabin")),
    "walker": (_w("Weigher Counter Scout Tallier Runner Seeker Rover Crawler Surveyor Auditor "
                  "Probe Ranger Tracker Sampler"),
               _w("Prowler Drifter Censor Gauger Roamer")),
    "acc": (_w("total tally hits found seen acc mass load heap sum_so_far"),
            _w("grand haul stash pile")),
    "who": (_w("player name user team owner guest pilot chef host author"),
            _w("rider sailor keeper judge")),
    "noun": (_w("goals points items tickets apples books cards songs coins stars"),
             _w("medals pearls stamps tokens")),
    "did": (_w("has got scored earned owns won"), _w("collected gained")),
    "text": (_w("text raw value entry field line"), _w("blob chunk")),
    "table": (_w("table prices stock ages"), _w("ledger roster")),
    "key": (_w("key name item code"), _w("slot label")),
    "qual": (_w("net raw top low new old max min avg sub"), _w("peak gross spare core")),
    "number": ([n for n in range(2, 61) if n not in (7, 13, 17, 23, 29, 34, 41, 46, 52, 58)],
               [7, 13, 17, 23, 29, 34, 41, 46, 52, 58]),
}
QUALIFIED = {"int", "plural", "acc", "text", "table", "key"}  # names get a qualifier: net_price
PEOPLE = _w("ana ben cai dee eli fay gus hal ivy jon")  # string inputs in entry blocks only

OPS = {"+": "plus", "-": "minus", "*": "times"}
CMPS = {">": "greater than", "<": "less than", ">=": "at least", "<=": "at most"}
CMP_FN = {">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le}
FOLDS = {"sum": "sum", "count": "len", "largest": "max"}
ACCS = ("sum", "count")
CONDS = ("none", *CMPS)
XFORMS = {"none": "", "upper": " with {p} upper-cased", "lower": " with {p} lower-cased"}
ERR_KINDS = ("int", "float", "lookup")
ERR_FALLBACKS = ("const", "param")

_OP_PAIRS = [f"{a},{b}" for a in OPS for b in OPS]
# combinations only the holdout uses (each still appears in training in another shape)
HOLD_ONLY = {
    "arith": {"-,*", "*,*"},
    "method": {"+,-", "*,-"},
    "text": {"upper,last"},
    "filter": set(),
    "fold": {"count,<=", "largest,<"},
    "walk": {"count,<", "sum,>="},
    "node": {"sum,<", "count,>="},
    "err": {"lookup,param"},
}
COMBOS = {
    "arith": _OP_PAIRS, "method": _OP_PAIRS,
    "text": [f"{x},{o}" for x in XFORMS for o in ("first", "last")],
    "filter": list(CMPS),
    "fold": [f"{f},{c}" for f in FOLDS for c in CMPS],
    "walk": [f"{a},{c}" for a in ACCS for c in CONDS],
    "node": [f"{a},{c}" for a in ACCS for c in CONDS],
    "err": [f"{k},{f}" for k in ERR_KINDS for f in ERR_FALLBACKS],
}
FAMILY = {"arith": "lib", "method": "arch", "text": "text", "filter": "syn", "fold": "syn",
          "walk": "osp", "node": "osp", "err": "err"}
SHAPES = tuple(FAMILY)
DOC = {"arith": "arithmetic over parameters", "method": "arithmetic over fields",
       "text": "an f-string from a template", "filter": "a list filter",
       "fold": "a filtered fold", "walk": "a walker along edges",
       "node": "a node ability feeding its visitor", "err": "a fallback on error"}


class Draw:
    """Names and numbers for one program, from one side's pools, never repeating a name."""

    def __init__(self, rng: random.Random, side: int):
        self.rng, self.side, self.used = rng, side, set()

    def pick(self, role: str):
        pool = [x for x in POOLS[role][self.side] if x not in self.used]
        x = self.rng.choice(pool)
        if role == "number":
            return x
        self.used.add(x)
        return f"{self.rng.choice(POOLS['qual'][self.side])}_{x}" if role in QUALIFIED else x

    def ints(self, n: int, lo: int = 1, hi: int = 60) -> list[int]:
        return [self.rng.randint(lo, hi) for _ in range(n)]


# -------------------------------------------------------------------------------------------
# shapes: each returns (header lines, unit lines with "{HOLE}", entry lines, instruction, body)
# -------------------------------------------------------------------------------------------

def _expr(operands: list[str], ops: list[str]) -> str:
    return f"{operands[0]} {ops[0]} {operands[1]} {ops[1]} {operands[2]}"


def _words(operands: list[str], ops: list[str]) -> str:
    return f"{operands[0]} {OPS[ops[0]]} {operands[1]} {OPS[ops[1]]} {operands[2]}"


def _arith(d: Draw, combo: str):
    ops = combo.split(",")
    a, b = d.pick("int"), d.pick("int")
    n = str(d.pick("number"))
    fn = f"{d.pick('verb')}_{d.pick('int')}"
    unit = [f"def {fn}({a}: int, {b}: int) -> int {{", "{HOLE}", "}"]
    calls = [f"    print({fn}({x}, {y}));" for x, y in zip(d.ints(3), d.ints(3))]
    return ([], unit, calls, f"Return {_words([a, b, n], ops)}.",
            [f"return {_expr([a, b, n], ops)};"])


def _method(d: Draw, combo: str):
    ops = combo.split(",")
    t, f1, f2 = d.pick("type"), d.pick("int"), d.pick("int")
    n = str(d.pick("number"))
    fn = f"{d.pick('verb')}_{d.pick('int')}"
    s1, s2 = f"self.{f1}", f"self.{f2}"
    unit = [f"obj {t} {{", f"    has {f1}: int;", f"    has {f2}: int;", "",
            f"    def {fn}() -> int {{", "{HOLE}", "    }", "}"]
    calls = [f"    print({t}({f1}={x}, {f2}={y}).{fn}());" for x, y in zip(d.ints(3), d.ints(3))]
    return [], unit, calls, f"Return {_words([s1, s2, n], ops)}.", [
        f"return {_expr([s1, s2, n], ops)};"]


def _text(d: Draw, combo: str):
    xform, order = combo.split(",")
    p, q = d.pick("who"), d.pick("int")
    noun, did = d.pick("noun"), d.pick("did")
    fn = f"{d.pick('verb')}_{p}_line"
    slot = p if xform == "none" else f"{p}.{xform}()"
    if order == "first":
        shown, fmt = f"<{p}> {did} <{q}> {noun}", f"{{{slot}}} {did} {{{q}}} {noun}"
    else:
        shown, fmt = f"<{q}> {noun} for <{p}>", f"{{{q}}} {noun} for {{{slot}}}"
    unit = [f"def {fn}({p}: str, {q}: int) -> str {{", "{HOLE}", "}"]
    who = d.rng.sample(PEOPLE, 3)
    calls = [f'    print({fn}("{w.title() if i == 1 else w}", {x}));'
             for i, (w, x) in enumerate(zip(who, d.ints(3)))]
    instr = f"Return the text '{shown}'{XFORMS[xform].format(p=p)}."
    return [], unit, calls, instr, [f'return f"{fmt}";']


def _cond_values(d: Draw, op: str, n: int, k: int) -> list[int]:
    """k values with at least one that passes `x op n` and one that does not."""
    while True:
        xs = d.ints(k, 1, 70)
        ok = [CMP_FN[op](x, n) for x in xs]
        if any(ok) and not all(ok):
            return xs


def _list_fn(d: Draw, op: str, returns: str):
    """(plural, n, item, unit, calls) of a function over a list of ints whose body tests each
    item with `op` against n: the filter's and the fold's shared frame (draws in this order)."""
    plural = d.pick("plural")
    n, item = d.pick("number"), plural[:-1]
    fn = f"{d.pick('verb')}_{plural}"
    unit = [f"def {fn}({plural}: list[int]) -> {returns} {{", "{HOLE}", "}"]
    calls = [f"    print({fn}({_cond_values(d, op, n, 5)}));" for _ in range(3)]
    return plural, n, item, unit, calls


def _filter(d: Draw, combo: str):
    op = combo
    plural, n, item, unit, calls = _list_fn(d, op, "list[int]")
    return [], unit, calls, f"Return the {plural} that are {CMPS[op]} {n}.", [
        f"return [{item} for {item} in {plural} if {item} {op} {n}];"]


def _fold(d: Draw, combo: str):
    fold, op = combo.split(",")
    plural, n, item, unit, calls = _list_fn(d, op, "int")
    return [], unit, calls, f"Return the {fold} of the {plural} that are {CMPS[op]} {n}.", [
        f"return {FOLDS[fold]}([{item} for {item} in {plural} if {item} {op} {n}]);"]


def _graph(d: Draw, t: str, f: str, op: str, n: int) -> list[str]:
    """Entry lines: a chain of nodes under root (values passing and failing the condition)."""
    xs = _cond_values(d, op if op != "none" else ">", n, 4)
    lines = [f"    {v} = {t}({f}={x});" for v, x in zip("abcd", xs)]
    return lines + ["    root ++> a;", "    a ++> b;", "    b ++> c;", "    b ++> d;"]


def _add(step: str, cond: str, subject: str, f: str, n: int) -> list[str]:
    """The accumulation lines: `step`, guarded by `subject.f cond n` unless cond is none."""
    if cond == "none":
        return [step]
    return [f"if {subject}.{f} {cond} {n} {{", f"    {step}", "}"]


def _add_words(what: str, cond: str, target: str, subject: str, f: str, n: int) -> str:
    first = f"add {what} to {target}"
    if cond == "none":
        return first[0].upper() + first[1:]
    return f"When {subject}.{f} is {CMPS[cond]} {n}, {first}"


def _walk(d: Draw, combo: str):
    acc, cond = combo.split(",")
    t, w, f, a = d.pick("type"), d.pick("walker"), d.pick("int"), d.pick("acc")
    n = d.pick("number")
    what = f"here.{f}" if acc == "sum" else "1"
    body = _add(f"self.{a} += {what};", cond, "here", f, n)
    head = [f"node {t} {{", f"    has {f}: int;", "}", ""]
    unit = [f"walker {w} {{", f"    has {a}: int = 0;", "", "    can start with Root entry {",
            "        visit [-->];", "    }", "", f"    can step with {t} entry {{", "{HOLE}",
            "    }", "}"]
    calls = _graph(d, t, f, cond, n) + [f"    print((root spawn {w}()).{a});"]
    sep = "," if cond == "none" else ";"
    instr = f"{_add_words(what, cond, f'self.{a}', 'here', f, n)}{sep} then visit the " \
            "outgoing edges."
    return head, unit, calls, instr, body + ["visit [-->];"]


def _node(d: Draw, combo: str):
    acc, cond = combo.split(",")
    t, w, f, a = d.pick("type"), d.pick("walker"), d.pick("int"), d.pick("acc")
    n = d.pick("number")
    what = f"self.{f}" if acc == "sum" else "1"
    body = _add(f"visitor.{a} += {what};", cond, "self", f, n)
    unit = [f"node {t} {{", f"    has {f}: int;", "", f"    can feed with {w} entry {{",
            "{HOLE}", "    }", "}"]
    tail = [f"walker {w} {{", f"    has {a}: int = 0;", "", "    can start with Root entry {",
            "        visit [-->];", "    }", "", f"    can step with {t} entry {{",
            "        visit [-->];", "    }", "}"]
    calls = _graph(d, t, f, cond, n) + [f"    print((root spawn {w}()).{a});"]
    words = _add_words(what, cond, f"visitor.{a}", "self", f, n)
    instr = f"Node side: {words[0].lower()}{words[1:]}."
    return [], unit + [""] + tail, calls, instr, body


def _err(d: Draw, combo: str):
    kind, fallback = combo.split(",")
    ret = "float" if kind == "float" else "int"
    dflt = str(-d.pick("number")) + (".5" if kind == "float" else "")
    fn = f"{d.pick('verb')}_{d.pick('int')}"
    if fallback == "param":
        dflt = d.pick("int")
    extra = f", {dflt}: {ret}" if fallback == "param" else ""
    args = "" if fallback == "const" else f", {d.ints(1, 1, 9)[0]}{'.5' * (kind == 'float')}"
    if kind == "lookup":
        tb, k = d.pick("table"), d.pick("key")
        unit = [f"def {fn}({tb}: dict[str, int], {k}: str{extra}) -> int {{", "{HOLE}", "}"]
        keys = d.rng.sample(PEOPLE, 3)
        table = "{" + ", ".join(f'"{x}": {v}' for x, v in zip(keys, d.ints(3))) + "}"
        calls = [f"    {tb} = {table};"] + [f'    print({fn}({tb}, "{x}"{args}));'
                                             for x in (keys[0], "zed", keys[2])]
        expr, exc = f"{tb}[{k}]", "KeyError"
    else:
        tx = d.pick("text")
        unit = [f"def {fn}({tx}: str{extra}) -> {ret} {{", "{HOLE}", "}"]
        good = [str(x) if kind == "int" else f"{x}.25" for x in d.ints(2)]
        calls = [f'    print({fn}("{x}"{args}));' for x in (good[0], "n/a", good[1])]
        expr, exc = f"{kind}({tx})", "ValueError"
    body = ["try {", f"    return {expr};", f"}} except {exc} {{", f"    return {dflt};", "}"]
    return [], unit, calls, f"Return {expr}; when that raises {exc}, return {dflt}.", body


MAKERS: dict[str, Callable] = {"arith": _arith, "method": _method, "text": _text,
                               "filter": _filter, "fold": _fold, "walk": _walk, "node": _node,
                               "err": _err}
