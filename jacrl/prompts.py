"""The prompt every stage uses: [system = SYSTEM_PROMPT, user = task prompt], rendered with the
model's chat template. SFT trains on it (plus the assistant turn), GRPO rolls out with it, and
evaluation samples with it."""

from __future__ import annotations

SYSTEM_PROMPT = (
    "You are an expert Jac programmer. Answer with only the requested Jac code, in "
    "one ```jac code block."
)


def chat_messages(
    prompt: str, answer: str | None = None, system: str = SYSTEM_PROMPT
) -> list[dict]:
    """The chat every stage uses: system, user (+ assistant when training)."""
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    if answer is not None:
        msgs.append({"role": "assistant", "content": answer})
    return msgs


def prompt_ids(tokenizer, prompt: str, system: str = SYSTEM_PROMPT) -> list[int]:
    """The token ids of the chat prompt, ending with the assistant turn's opening."""
    ids = tokenizer.apply_chat_template(
        chat_messages(prompt, system=system), add_generation_prompt=True, return_dict=False
    )
    return list(ids)
