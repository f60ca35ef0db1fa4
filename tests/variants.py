"""Answer shapes a model produces, all built from a driver's gold body."""

from __future__ import annotations

from jacrl.drivers import Driver
from jacrl.jacsyntax import code_mask, enclosing, headers, match_brace


def whole_unit(d: Driver) -> str:
    """The hole's unit as written in the driver (modifiers, header to closing brace; markers
    removed), found from the marker's position like the driver parser does."""
    text = d.text
    mask = code_mask(text)
    marker = text.index(">>>HOLE")
    by_brace = {h.brace: h for h in headers(text, mask)}
    head = [by_brace[b] for b in enclosing(mask, marker) if b in by_brace][-1]
    line_start = text.rfind("\n", 0, head.start) + 1
    start = line_start + len(text[line_start:head.start]) - len(text[line_start:head.start].lstrip())
    unit = text[start:match_brace(mask, head.brace) + 1]
    return "\n".join(ln for ln in unit.split("\n") if "HOLE" not in ln)


def variants(d: Driver) -> dict[str, str]:
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
        "prose": f"Here is the body you asked for:\n\n```jac\n{gold}\n```\n\nIt handles the edge cases.",
        "unclosed_fence": f"```jac\n{gold}\n",
        "whole_driver": f"```jac\n{echoed}\n```",
        "whole_driver_clean": f"Sure, the complete file:\n```jac\n{echoed_clean}\n```\nDone.",
        "truncated_echo": f"```jac\n{echoed_clean[:cut]}\nwith entry {{\n    print(",
        # mlx-lm-lora's GRPO format: thinking first, then the answer in tags
        "think_answer_fence": (f"<think>\nLoop, then return.\n</think>\n"
                               f"<answer>\n```jac\n{gold}\n```\n</answer>"),
        "answer_inline_fence": f"<think>short</think><answer>```jac\n{gold}\n```</answer>",
        "answer_bare": f"<answer>\n{gold}\n</answer>",
        "answer_unclosed": f"<think>\nok\n</think>\n<answer>\n```jac\n{gold}\n",
        # a thought holding fences, a decoy unit and stray braces: never the answer
        "think_with_junk": (f"<think>\nFirst try:\n```jac\n{decoy}\n```\n```\n}} {{ return;\n"
                            f"</think>\n<answer>\n```jac\n{gold}\n```\n</answer>"),
        # a chat template that opened <think> in the prompt: only its close is generated
        "think_opened_by_prompt": (f"{decoy}\n```jac\nreturn 0;\n```\n</think>\n\n"
                                   f"```jac\n{gold}\n```"),
    }
    if not d.unit.partial:
        out["whole_unit"] = f"```jac\n{unit}\n```"
        out["whole_unit_bare"] = unit
    return out
