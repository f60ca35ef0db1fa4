"""Extraction and splicing, without running anything: every answer shape yields the gold body;
dedent's bracket depths, thinking, fences (the first is the body),
which of several same-named units is taken, splice's errors; and the Jac lexer
(jacrl.ruler.jacsyntax) they rest on: strings, replacement fields, headers and the blocks enclosing
a position."""

from __future__ import annotations

import pytest
from conftest import HARNESS
from variants import variants

from jacrl.ruler import jacsyntax
from jacrl.ruler.drivers import parse_driver
from jacrl.ruler.extract import (
    HOLE_TOKEN,
    Unit,
    answer_text,
    clean,
    code_blocks,
    dedent,
    extract_body,
    splice,
)
from jacrl.ruler.jacsyntax import code_mask, has_code, headers, match_brace
from jacrl.ruler.variants import driver_shapes, formatted_shapes, formatting_variants

DRIVERS = [parse_driver(p) for p in HARNESS]


def test_harness_covers_every_unit_kind():
    kinds = {(d.unit.kind, bool(d.unit.containers), d.unit.partial) for d in DRIVERS}
    assert ("def", False, False) in kinds  # pure function
    assert ("def", True, False) in kinds  # obj method
    assert ("can", True, False) in kinds  # walker / node ability
    assert ("def", False, True) in kinds  # partial-body hole
    assert len(DRIVERS) >= 6


@pytest.mark.parametrize("d", DRIVERS, ids=lambda d: d.id)
def test_every_variant_extracts_the_gold_body(d):
    want = dedent(d.gold).strip("\n")
    for name, completion in variants(d).items():
        assert extract_body(completion, d.unit) == want, name


FORMATTING = {
    "crlf",
    "cr",
    "bom",
    "zwsp_before_fence",
    "tilde_fence",
    "four_backticks",
    "nbsp_indent",
    "fence_indented",
    "all_at_once",
}


@pytest.mark.parametrize("d", DRIVERS, ids=lambda d: d.id)
def test_every_formatting_variant_of_every_shape_extracts_the_gold_body(d):
    want = dedent(d.gold).strip("\n")
    shapes = formatted_shapes(d)
    assert {name.split("/")[1] for name in shapes} == FORMATTING
    assert len(shapes) >= len(driver_shapes(d)) * 7
    for name, completion in shapes.items():
        assert extract_body(completion, d.unit) == want, name


def test_formatting_variants_of_every_corpus_echo_extract_the_gold():
    from conftest import ROOT

    from jacrl.tasks.validate import load_all

    checked = 0
    for d in load_all(ROOT / "drivers")[0]:  # every unit kind, string and match the corpus has
        want = dedent(d.gold).strip("\n")
        shapes = driver_shapes(d)
        for shape in ("whole_driver", "prose", "answer_bare"):
            for name, completion in formatting_variants(shapes[shape]).items():
                assert extract_body(completion, d.unit) == want, (d.id, shape, name)
                checked += 1
    assert checked > 5000


# what clean() replaces or drops: nothing here may occur in a gold body or a driver
SPECIAL = "\r\x00\ufeff\u200b\u200c\u200d\u2060\u00a0\u1680\u202f\u205f\u3000" + "".join(
    map(chr, range(0x2000, 0x200B))
)


def test_clean_normalises_what_a_model_writes():
    assert clean("a\r\nb\rc\r\n\r\n") == "a\nb\nc\n\n"
    assert clean("\ufeffx\u200by\u200cz\u200d\u2060w\x00!") == "xyzw!"
    assert clean(SPECIAL[3:]) == " " * (len(SPECIAL) - 7)  # every space separator, one space each
    assert clean("\r\x00\n") == "\n"  # a NUL between CR and LF leaves one line break
    assert clean("a\ud800b\udfff") == "a\ufffdb\ufffd"  # lone surrogates
    assert clean("\ud83d\ude00") == "\U0001f600"  # a split pair is joined
    kept = 'tab\tand ünïcødé λ → 😀 "quoted" ``` ~~~\n'
    assert clean(kept) == kept
    rng = __import__("random").Random(18)
    alphabet = SPECIAL + "\ud800\udbff\udc00\udfff\n\t a{"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
        once = clean(text)
        assert clean(once) == once, ascii(text)  # idempotent
        once.encode("utf-8")  # and always encodable
        assert not set(once) & set(SPECIAL), ascii(text)


def test_clean_leaves_every_gold_body_and_driver_alone():
    import json

    from conftest import ROOT

    from jacrl.tasks.validate import load_all

    rows = [json.loads(line) for line in (ROOT / "data" / "tasks.jsonl").open(encoding="utf-8")]
    assert len(rows) >= 200
    drivers = load_all(ROOT / "drivers")[0]
    texts = [json.loads(r["answer"])["gold"] for r in rows] + [d.text for d in drivers]
    for text in texts + [json.loads(r["answer"])["template"] for r in rows]:
        assert not set(text) & set(SPECIAL), text[:80]
        assert clean(text) == text, text[:80]


def test_fences_follow_commonmark():
    # a longer fence keeps the shorter ones inside it; a ~~~ block keeps its ``` lines
    assert code_blocks("````jac\nx;\n```\ninner\n```\n````\n") == ["x;\n```\ninner\n```\n"]
    assert code_blocks("~~~jac\na;\n```\nb;\n~~~") == ["a;\n```\nb;\n"]
    assert code_blocks("```jac\na;\n~~~\nb;\n`````") == ["a;\n~~~\nb;\n"]  # a longer closer
    assert code_blocks("````\na;\n```") == ["a;\n```"]  # too short: unclosed, runs to the end
    assert code_blocks("```jac\na;\n```python\nb;\n```") == ["a;\n```python\nb;\n"]  # no info
    assert code_blocks("```python\np\n```\n~~~  Jac  \nj\n~~~") == ["j\n", "p\n"]  # jac first
    assert code_blocks("Run ```x``` first.\n```jac\nr;\n```") == ["r;\n"]  # inline, not a fence
    # an indented fence (a list item, a tab, NBSP): its lines lose the fence's indentation only
    assert code_blocks('1. Here:\n   ```jac\n   s = """a\n   b""";\n       return s;\n   ```') == [
        's = """a\nb""";\n    return s;\n'
    ]
    assert code_blocks("\t~~~jac\n\tx;\n\t~~~") == ["x;\n"]
    assert code_blocks("\u00a0\u00a0```jac\n\u00a0\u00a0x;\n\u00a0\u00a0```") == ["x;\n"]
    assert code_blocks("\u200b```jac\r\nx;\r\n```\r\n") == ["x;\n"]


@pytest.mark.parametrize("d", DRIVERS, ids=lambda d: d.id)
def test_splicing_gold_restores_the_driver(d):
    without_markers = "\n".join(ln for ln in d.text.split("\n") if "HOLE" not in ln)
    assert splice(d.template, d.gold) == without_markers
    # a body extracted from any shape splices back to the same program
    assert splice(d.template, extract_body(f"```jac\n{d.text}\n```", d.unit)) == without_markers


def test_braces_and_keywords_inside_strings_and_comments_are_not_code():
    src = (
        'def f() -> str {\n    s = "def g() {";  # } can h with X entry {\n'
        '    return f"{{{s}}}";\n}\n'
    )
    mask = code_mask(src)
    assert [h.name for h in headers(src, mask)] == ["f"]
    assert match_brace(mask, src.index("{")) == len(src) - 2


def test_unit_in_a_string_literal_is_not_taken():
    d = next(d for d in DRIVERS if d.id == "arch_harness_account_deposit")
    decoy = (
        '```jac\nglob note: str = "def deposit(amount: int) -> bool { return False; }";\n'
        + d.text
        + "\n```"
    )
    assert extract_body(decoy, d.unit) == dedent(d.gold).strip("\n")


def test_same_method_name_in_another_archetype_is_not_taken():
    d = next(d for d in DRIVERS if d.id == "arch_harness_account_deposit")
    # Ledger.deposit comes first in this echo; the hole is Account.deposit
    text = d.text
    ledger = text[text.index("obj Ledger") : text.index("with entry")]
    echo = ledger + text.replace(ledger, "")
    assert extract_body(f"```jac\n{echo}\n```", d.unit) == dedent(d.gold).strip("\n")


def test_whole_unit_is_unwrapped_not_nested():
    d = next(d for d in DRIVERS if d.id == "syn_harness_collatz_steps")
    renamed = "def collatz(n: int) -> int {\n    return 0;\n}"
    assert extract_body(renamed, d.unit) == "return 0;"
    # but a bare body that merely starts with a local helper stays a body
    body = "def helper(x: int) -> int {\n    return x;\n}\nreturn helper(n);"
    assert extract_body(body, d.unit) == body


def test_code_blocks_prefers_jac_fence_and_survives_truncation():
    text = "```python\nprint(1)\n```\ntext\n```jac\nreturn 2;\n```"
    assert code_blocks(text)[0] == "return 2;\n"
    assert code_blocks("```jac\nreturn 3;") == ["return 3;"]
    assert code_blocks("no fence") == ["no fence"]


def test_partial_hole_answer_repeating_the_unit_keeps_only_the_middle():
    d = next(d for d in DRIVERS if d.unit.partial)
    got = extract_body(f"```jac\n{d.text}\n```", d.unit)
    assert got == dedent(d.gold).strip("\n")
    assert "return result" not in got


def test_splice_keeps_multiline_strings_byte_for_byte():
    template = "def f() -> str {\n    __HOLE__\n}\n"
    body = 's = """a\nb""";\nreturn s;'
    assert splice(template, body) == 'def f() -> str {\n    s = """a\nb""";\n    return s;\n}\n'


def test_splice_needs_exactly_one_hole():
    with pytest.raises(ValueError):
        splice("no hole here", "x;")


def test_empty_and_marker_only_answers_extract_to_nothing():
    d = DRIVERS[0]
    assert extract_body("", d.unit) == ""
    assert extract_body("```jac\n```", d.unit) == ""
    assert extract_body("```jac\n    # TODO: write the body for this unit\n```", d.unit) == ""


def test_every_shape_of_every_corpus_driver_extracts_the_gold():
    from conftest import ROOT

    from jacrl.tasks.validate import load_all

    checked = 0
    for d in load_all(ROOT / "drivers")[0]:
        want = dedent(d.gold).strip("\n")
        for name, completion in variants(d).items():
            assert extract_body(completion, d.unit) == want, (d.id, name)
            checked += 1
    assert checked > 2000


def test_nested_quotes_in_fstrings_and_block_comments_are_masked():
    src = (
        'def f() -> str {\n    x = f"{d["k"]} {{" + f"{ {1: 2}[1] }";\n'
        "    #* } block { *#\n    return x;\n}\ndef g() { }\n"
    )
    mask = code_mask(src)
    assert [(h.name, src[h.brace]) for h in headers(src, mask)] == [("f", "{"), ("g", "{")]
    assert mask[match_brace(mask, src.index("{"))] == "}" and match_brace(
        mask, src.index("{")
    ) == src.index("}\ndef g")


# a body's first line at the margin, later lines deeper: a second dedent must not cut them again
CRAFTED = [
    "x = foo(\n    a,\n    b);",
    "    x = [\n        1,\n        2];",
    "for x in y {\n        a;\n    }",  # an answer that was .strip()ped
    "x = 1;\n    y = 2;",
    's = """\n  kept\n    as is""";\n    return s;',  # a multi-line string
    '    s = """a\n        b""";\n    return s;',
    "\tif x {\n\t\ty;\n\t}",  # tabs
    "\tx = f(\n\t\ta);",
]


def test_dedent_is_idempotent():
    from conftest import ROOT

    from jacrl.tasks.record import read_tasks

    golds = [t["meta"]["gold"] for t in read_tasks(ROOT / "data" / "tasks.jsonl")]
    assert len(golds) >= 200
    for text in golds + CRAFTED:
        once = dedent(text)
        assert dedent(once) == once, text
    assert dedent(CRAFTED[0]) == CRAFTED[0]  # a continuation line is not a lost indentation
    assert dedent(CRAFTED[1]) == "x = [\n    1,\n    2];"
    assert dedent(CRAFTED[2]) == "for x in y {\n    a;\n}"
    assert dedent(CRAFTED[4]) == 's = """\n  kept\n    as is""";\nreturn s;'
    assert dedent(CRAFTED[6]) == "if x {\n\ty;\n}"


def test_gold_is_exactly_similar_to_itself_on_every_task():
    from conftest import ROOT

    from jacrl.ruler.reward import Hole, body_similarity
    from jacrl.tasks.record import read_tasks

    for t in read_tasks(ROOT / "data" / "tasks.jsonl"):
        hole = Hole.from_answer(t["answer"])
        gold = hole.gold
        assert body_similarity(gold, gold) == 1.0, hole.id
        # what the reward compares: the body extracted from the gold answer vs the gold
        for body in (dedent(gold), gold.strip(), extract_body(f"```jac\n{gold}\n```", hole.unit)):
            assert body_similarity(body, gold) == 1.0, hole.id
    for text in CRAFTED:
        assert body_similarity(dedent(text), text) == 1.0, text


def test_thinking_is_never_the_answer():
    d = next(d for d in DRIVERS if d.id == "syn_harness_collatz_steps")
    gold = f"```jac\n{d.gold}\n```"
    assert answer_text("<think>a</think>\n<answer>b</answer>") == "b"
    assert answer_text("<think>a</think>\n<answer>b") == "b"  # truncated answer
    assert answer_text("a </think> b") == " b"  # <think> was opened by the chat template
    # an unclosed <think>, even around a correct fence, leaves no answer
    assert extract_body(f"<think>\nMaybe:\n{gold}\n", d.unit) == ""
    assert extract_body("<think>```jac\nreturn 1;\n```</think>", d.unit) == ""
    assert extract_body("<think>x</think><answer></answer>", d.unit) == ""
    assert code_blocks(f"<think>```jac\nreturn 0;\n```</think>{gold}") == [d.gold + "\n"]


@pytest.mark.parametrize(
    "body",
    [
        "",
        "# TODO: write the body for this unit",
        "# ...",
        "# step 1\n\n# step 2",
        "pass",
        "pass;",
        "...",
        "...;",
        "{}",
        "{ }",
        "#* block\ncomment *#",
        "{ pass; }\n# x\n...\n;",
    ],
)
def test_no_code_once_comments_and_placeholders_go(body):
    d = DRIVERS[0]
    for completion in (body, f"```jac\n{body}\n```"):
        assert not has_code(extract_body(completion, d.unit)), completion


@pytest.mark.parametrize(
    "body",
    [
        'return "# x";',
        '"pass";',
        'x = "...";',
        "x = ...;",
        "passes = 1;",
        "return;",
        "#* c *# return 1;",
    ],
)
def test_a_statement_is_code_even_with_comment_or_placeholder_text(body):
    assert has_code(body)


# -- the extractor ---------------------------------------------------------------------------


def test_two_brackets_opened_on_one_line_are_two_levels_for_dedent():
    """jacrl.ruler.extract._line_depths (`depth = 1` for `depth += 1`): `f(g(` leaves the next lines
    two levels deep, so `), 2)` is still inside a bracket, not a statement, and the first
    line's shallower margin is no reason to cut the later lines."""
    body = "x = f(g(\n        1\n    ), 2)"
    assert dedent(body) == body
    # with a line back at depth 0 the later lines are cut to their own margin
    assert dedent("x = f(g(1))\n    y = 2\n    z = 3") == "x = f(g(1))\ny = 2\nz = 3"


def test_a_stray_closer_closes_one_bracket_for_dedent():
    """jacrl.ruler.extract._line_depths (`depth - 2` at a closer): `f((a),` leaves the next lines
    one level deep, so they are arguments, not statements, and nothing is cut."""
    body = "x = f((a),\n        1,\n        2)"
    assert dedent(body) == body


def test_everything_up_to_the_last_think_close_is_thinking():
    """answer_text (`find` for `rfind`): a prompt that opened <think> leaves the completion's
    thinking up to its last </think>, however many the thinking names."""
    text = "I might write </think> here.\nStill thinking.</think>\n```jac\nreturn 1;\n```"
    assert answer_text(text) == "\n```jac\nreturn 1;\n```"


def test_a_backtick_fence_with_a_backtick_in_its_info_is_not_a_fence_a_tilde_one_is():
    """code_blocks (CommonMark: a backtick fence's info string has no backtick)."""
    assert code_blocks("``` a`b\nx = 1;\n```jac\ny = 2;\n```") == ["y = 2;\n"]
    assert code_blocks("~~~ a`b\nx = 1;\n~~~") == ["x = 1;\n"]


def test_a_whole_unit_with_a_braced_decorator_is_unwrapped_at_its_own_brace():
    """extract_body (`mask.find("{", m.end())`): the brace after `def`, not one in a decorator."""
    unit = Unit("def", "f", "def f() -> int", (), "", "")
    completion = "```jac\n@cache({})\ndef g() -> int {\n    return 1;\n}\n```"
    assert extract_body(completion, unit) == "return 1;"


def test_splice_says_how_many_hole_lines_a_bad_template_has():
    with pytest.raises(
        ValueError, match=f"^template must have exactly one {HOLE_TOKEN} line, has 2$"
    ):
        splice(f"a\n{HOLE_TOKEN}\n{HOLE_TOKEN}\n", "x = 1;")
    with pytest.raises(ValueError, match=" line, has 0$"):
        splice("a\n", "x = 1;")


# -- the Jac lexer (jacrl.ruler.jacsyntax) ---------------------------------------------------------


def _second_line(text: str) -> str:
    return jacsyntax.code_mask(text).split("\n")[1]


def test_a_single_quoted_string_left_open_ends_at_its_line():
    """_string_end (`c == "XX\\nXX"`): the next line is code again."""
    assert jacsyntax.code_mask('s = "abc\nt = {1}') == "s =     \nt = {1}"


def test_a_replacement_field_spans_lines_and_a_runaway_one_ends_at_its_line():
    """_string_end (`c == "\\n" or top[0] > 8`): a field's newline does not end it; only one
    more than 8 braces deep does."""
    assert jacsyntax.code_mask("s = f'{\n}' + 'a'\nt = 1") == "s =    \n   +    \nt = 1"
    assert _second_line('s = f"{{{{{{{{{{x\ny = {1}') == "y = {1}"


def test_strings_nested_in_a_replacement_field_are_strings():
    """_string_end (the string-prefix checks inside a field): a quote or a prefix letter not
    glued to a name opens a nested string (an f-string when its prefix has an f), and the code
    after the outer string stays code."""
    for field in ("'{'", "xf'{'", "_f'{'", "f'{'{'}'", "f'{'{{'}'", "F'{1}'", "rf'{'}'}'"):
        assert _second_line('s = f"{' + field + '}"\nt = 1') == "t = 1", field


def test_a_header_inside_brackets_finds_its_body():
    """_HeaderBraces.__call__ (the header's own bracket level, not 0)."""
    assert [(h.name, h.brace) for h in jacsyntax.headers("x = f(def g() { 1 });")] == [("g", 14)]


def test_a_position_after_every_brace_is_inside_nothing():
    """enclosing_names (`j <= len(braces)`): positions past the last brace."""
    assert jacsyntax.enclosing_names("a { b } c", {2: "a"}, [9], 3) == [()]
    assert jacsyntax.enclosing_names("a { b c", {2: "a"}, [6, 1], 3) == [("a",), ()]


def test_enclosing_blocks_of_positions_at_inside_and_after_braces():
    """enclosing_many (`j <= len(braces)`, `braces[j] <= p`): a position at a `{` is not inside
    its block, one after it is, one past every brace is inside nothing."""
    mask = "a { b } c { {"
    got = jacsyntax.enclosing_many(mask, [2, 4, 8, 13, 11])
    assert got == [[], [2], [], [10, 12], [10]]


def test_first_fenced_block_is_the_body_when_a_fenced_example_follows():
    unit = Unit("def", "double", "def double(x: int) -> int", (), "", "")
    completion = (
        "Here is the body:\n```jac\nreturn x * 2;\n```\nUsage:\n```jac\nprint(double(6));\n```\n"
    )
    assert extract_body(completion, unit) == "return x * 2;"
    untagged = completion.replace("```jac", "```")
    assert extract_body(untagged, unit) == "return x * 2;"


def test_the_unit_is_found_by_name_then_by_where_it_sits():
    """Several units named like the hole's: the one in the hole's archetypes, else a top-level
    one, else one elsewhere; the first of equals."""
    in_a = Unit("def", "f", "def f() -> int", ("A",), "", "")
    echoed = "```jac\ndef g() -> int { return 0; }\ndef f() -> int { return 1; }\n```"
    assert extract_body(echoed, in_a).strip() == "return 1;"  # top level when no A.f is given
    elsewhere = (
        "```jac\nobj B {\n    def f() -> int { return 2; }\n}\ndef f() -> int { return 1; }\n```"
    )
    assert extract_body(elsewhere, in_a).strip() == "return 1;"  # beats another archetype's
    twins = "```jac\ndef f() -> int { return 1; }\ndef f() -> int { return 2; }\n```"
    top = Unit("def", "f", "def f() -> int", (), "", "")
    assert extract_body(twins, top).strip() == "return 1;"


def test_thinking_closed_at_the_very_start_is_dropped():
    assert answer_text("</think>return 1;") == "return 1;"  # its <think> was in the prompt
