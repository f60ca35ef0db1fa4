"""Answer shapes built from a gold body, in one place for the tests, notebook 20 and the benchmark.

- `driver_shapes(d)`: the shapes a model writes a *correct* answer in (bare, fenced with any tag,
  prose around it, the whole driver echoed, a truncated echo, <think>/<answer>, the whole unit);
  each must score exactly 1.0 (tests/test_extract.py, tests/test_reward.py).
- `formatting_variants(completion)` / `formatted_shapes(d)`: the same answers as a model or a chat
  UI mangles them (CRLF or CR line endings, a BOM, a zero-width space, ~~~ or ```` fences, NBSP
  indentation, an indented fence); each must score exactly 1.0 too.
- `MUTATIONS` / `mutants(body)`: small edits that turn a gold body into a plausible wrong one
  (a flipped operator, a dropped brace, a misspelled method); bench/reward_throughput.py's set.
- `inspection_answers(meta, other_gold)`: notebook 20's labelled mix of right and wrong answers
  to one task, one per reward tier.
"""

from __future__ import annotations

import re

from jacrl.ruler.drivers import Driver
from jacrl.ruler.extract import splice
from jacrl.ruler.jacsyntax import code_mask, enclosing, headers, match_brace

# (pattern, replacement[, count]) for re.sub; count 0/absent = every match
MUTATIONS = [
    (r"\+=", "-="),
    (r"<=", "<"),
    (r" > ", " >= "),
    (r"\bTrue\b", "False"),
    (r"\bappend\b", "apend"),
    (r";", "", 1),
    (r"\b1\b", "2"),
    (r"\}", "", 1),
    (r"\bself\.", "", 1),
    (r"\breturn\b", "print", 1),
    (r"\bif\b", "while", 1),
    (r"\bhere\b", "root"),
    (r"\(", "[", 1),
]

GARBAGE = "```jac\n}} let x = = ; walker {\n```"


def mutants(body: str) -> list[tuple[str, str]]:
    """(label, mutated body) for every mutation that changes `body`, in MUTATIONS order."""
    out = []
    for m in MUTATIONS:
        mutated = re.sub(m[0], m[1], body, count=m[2] if len(m) > 2 else 0)
        if mutated != body:
            out.append((f"mutant {m[0]} -> {m[1] or '(nothing)'}", mutated))
    return out


def whole_unit(d: Driver) -> str:
    """The hole's unit as written in the driver (modifiers, header to closing brace; markers
    removed), found from the marker's position like the driver parser does."""
    text = d.text
    mask = code_mask(text)
    marker = text.index(">>>HOLE")
    by_brace = {h.brace: h for h in headers(text, mask)}
    head = [by_brace[b] for b in enclosing(mask, marker) if b in by_brace][-1]
    line_start = text.rfind("\n", 0, head.start) + 1
    lead = text[line_start : head.start]  # modifiers before the header on its line
    start = line_start + len(lead) - len(lead.lstrip())
    unit = text[start : match_brace(mask, head.brace) + 1]
    return "\n".join(ln for ln in unit.split("\n") if "HOLE" not in ln)


def driver_shapes(d: Driver) -> dict[str, str]:
    """Correct answers to the driver's hole, one per shape (17 for a partial hole, else 19)."""
    gold = d.gold
    echoed = d.text
    echoed_clean = "\n".join(ln for ln in d.text.split("\n") if "HOLE" not in ln)
    unit = whole_unit(d)
    # truncated echo: the file up to just after the unit, fence never closed
    cut = echoed_clean.index(unit) + len(unit) + 1  # just past this unit's closing brace
    decoy = f"{d.unit.signature} {{\n    return None;\n}}"  # the hole's own unit, wrong body
    out = {
        "bare": gold,
        "bare_stripped": gold.strip(),
        "fence_jac": f"```jac\n{gold}\n```",
        "fence_Jac": f"```Jac\n{gold}\n```",
        "fence_python": f"```python\n{gold}\n```",
        "fence_bare": f"```\n{gold}\n```",
        "prose": (
            f"Here is the body you asked for:\n\n```jac\n{gold}\n```\n\nIt handles the edge cases."
        ),
        "unclosed_fence": f"```jac\n{gold}\n",
        "whole_driver": f"```jac\n{echoed}\n```",
        "whole_driver_clean": f"Sure, the complete file:\n```jac\n{echoed_clean}\n```\nDone.",
        "truncated_echo": f"```jac\n{echoed_clean[:cut]}\nwith entry {{\n    print(",
        # mlx-lm-lora's GRPO format: thinking first, then the answer in tags
        "think_answer_fence": (
            f"<think>\nLoop, then return.\n</think>\n<answer>\n```jac\n{gold}\n```\n</answer>"
        ),
        "answer_inline_fence": f"<think>short</think><answer>```jac\n{gold}\n```</answer>",
        "answer_bare": f"<answer>\n{gold}\n</answer>",
        "answer_unclosed": f"<think>\nok\n</think>\n<answer>\n```jac\n{gold}\n",
        # a thought holding fences, a decoy unit and stray braces: never the answer
        "think_with_junk": (
            f"<think>\nFirst try:\n```jac\n{decoy}\n```\n```\n}} {{ return;\n"
            f"</think>\n<answer>\n```jac\n{gold}\n```\n</answer>"
        ),
        # a chat template that opened <think> in the prompt: only its close is generated
        "think_opened_by_prompt": (
            f"{decoy}\n```jac\nreturn 0;\n```\n</think>\n\n```jac\n{gold}\n```"
        ),
    }
    if not d.unit.partial:
        out["whole_unit"] = f"```jac\n{unit}\n```"
        out["whole_unit_bare"] = unit
    return out


def _indent_fences(text: str) -> str:
    """Every ``` line and what lies between two of them indented by two spaces (a list item)."""
    out, inside = [], False
    for line in text.split("\n"):
        fence = line.startswith("```")
        out.append("  " + line if fence or inside else line)
        inside ^= fence
    return "\n".join(out)


def formatting_variants(completion: str) -> dict[str, str]:
    """`completion` reformatted the ways models and chat UIs do, one per name; variants that leave
    it unchanged (a fence variant of an answer without a fence) are left out."""
    nbsp = re.sub(r"(?m)^ +", lambda m: "\u00a0" * len(m[0]), completion)
    out = {
        "crlf": completion.replace("\n", "\r\n"),
        "cr": completion.replace("\n", "\r"),
        "bom": "\ufeff" + completion,
        "zwsp_before_fence": (
            completion.replace("```", "\u200b```") if "```" in completion else "\u200b" + completion
        ),
        "tilde_fence": completion.replace("```", "~~~"),
        "four_backticks": completion.replace("```", "````"),
        "nbsp_indent": nbsp,
        "fence_indented": _indent_fences(completion),
        "all_at_once": "\ufeff"
        + _indent_fences(nbsp).replace("```", "\u200b~~~~").replace("\n", "\r\n"),
    }
    return {name: text for name, text in out.items() if text != completion}


def formatted_shapes(d: Driver) -> dict[str, str]:
    """Every `formatting_variants` of every `driver_shapes` answer, named "shape/variant"."""
    return {
        f"{shape}/{name}": text
        for shape, completion in driver_shapes(d).items()
        for name, text in formatting_variants(completion).items()
    }


def inspection_answers(meta: dict, other_gold: str) -> dict[str, str]:
    """Notebook 20's hand-made answers to one task (`meta`: its answer JSON): the gold fenced and
    bare and the whole file echoed (all exact), the echo cut at 60 % (a fence left open by
    truncation), every mutant of the gold, another task's gold, garbage and nothing."""
    gold = meta["gold"]
    echo = splice(meta["template"], gold)
    out = {
        "gold (fenced)": f"```jac\n{gold}\n```",
        "gold (bare)": gold,
        "echoed file": f"Here is the file:\n```jac\n{echo}\n```",
        "truncated echo": f"```jac\n{echo[: int(len(echo) * 0.6)]}",
    }
    out.update({label: f"```jac\n{body}\n```" for label, body in mutants(gold)})
    out.update(
        {"another task's body": f"```jac\n{other_gold}\n```", "garbage": GARBAGE, "empty": ""}
    )
    return out
