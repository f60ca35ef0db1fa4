"""jacrl.models.check / `jacrl models check`: jac-tiny passes; hand-written tokenizer configs of
other shapes (no system role, a dropped system message, several end tokens, a turn closed by a
token that is not an end token, a thinking template, a prompt SFT renders differently) are
found from the tokenizer and config alone, as one-line errors (exit 2) or warnings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from jacrl.cli import main
from jacrl.config import EvalConfig, GRPOConfig, SFTConfig
from jacrl.models.check import check_model
from jacrl.models.registry import ModelError, load_tokenizer
from jacrl.tasks.record import read_tasks

TINY_DIR = Path(__file__).resolve().parent.parent / "models" / "jac-tiny"

# ChatML, as jac-tiny's; the variants below change one thing each
CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
NO_SYSTEM = (
    "{% if messages[0]['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}" + CHATML
)
DROPS_SYSTEM = (
    "{% for m in messages if m['role'] != 'system' %}{{ '<|im_start|>' + m['role'] "
    "+ '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
OTHER_ROLE = CHATML.replace(
    "'<|im_start|>' + m['role']",
    "'<|im_start|>' + ('model' if m['role'] == 'assistant' else m['role'])",
)
# Qwen3's shape: the last assistant turn carries a think block; generation opens one unless
# enable_thinking is false, which closes it empty
THINKING = (
    "{% for m in messages %}{% if m['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' + m['content'] + "
    "'<|im_end|>\\n' }}{% else %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
    "'<|im_end|>\\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% if enable_thinking is defined and "
    "enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}{% endif %}"
)


def make_model(
    tmp_path: Path,
    name: str,
    template: str | None,
    *,
    eos=2,
    eos_token: str | None = "<|im_end|>",
    think: bool = False,
) -> Path:
    """A model dir: jac-tiny's config and tokenizer with a hand-written tokenizer_config.json
    and chat template (its weights linked, never loaded)."""
    d = tmp_path / name
    d.mkdir()
    config = json.loads((TINY_DIR / "config.json").read_text())
    config["eos_token_id"] = eos
    (d / "config.json").write_text(json.dumps(config))
    tokenizer = json.loads((TINY_DIR / "tokenizer.json").read_text())
    if think:  # Qwen3's think tokens, added after the vocabulary
        for i, t in enumerate(("<think>", "</think>")):
            tokenizer["added_tokens"].append(
                {
                    "id": 4096 + i,
                    "content": t,
                    "single_word": False,
                    "lstrip": False,
                    "rstrip": False,
                    "normalized": False,
                    "special": False,
                }
            )
    (d / "tokenizer.json").write_text(json.dumps(tokenizer))
    tc = json.loads((TINY_DIR / "tokenizer_config.json").read_text())
    tc["eos_token"] = eos_token
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    if template is not None:
        (d / "chat_template.jinja").write_text(template)
    (d / "model.safetensors").symlink_to(TINY_DIR / "model.safetensors")
    return d


@pytest.fixture(scope="module")
def tasks(data_dir):
    return read_tasks(Path(data_dir) / "tasks.jsonl")[:6]


def levels(r) -> dict[str, str]:
    return {f.check: f.level for f in r.findings}


def text(r, check: str) -> str:
    return next(f.text for f in r.findings if f.check == check)


def test_jac_tiny_passes_every_check(capsys):
    """The CLI on the project's whole task set: every check ok, exit 0."""
    assert main(["models", "check", "jac-tiny"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "no weights loaded" in out[0] and "hole-fill + " in out[1]
    checks = [ln.split()[0:2] for ln in out[2:]]
    assert [lv for lv, _ in checks] == ["ok"] * len(checks)
    for name in (
        "architecture",
        "system",
        "same",
        "end",
        "prompt",
        "positions",
        "token",
        "thinking",
    ):
        assert name in [c for _, c in checks], name


def test_chatml_shapes(tmp_path, tasks):
    ok = check_model(make_model(tmp_path, "chatml", CHATML), tasks, tasks_label="6")
    assert not ok.errors and not ok.warnings
    assert "eval, SFT and GRPO render the same" in text(ok, "same prompt")
    assert ok.prompt_text.endswith("<|im_start|>assistant\n")
    # several end tokens: all reported, the turn's closer among them
    several = check_model(make_model(tmp_path, "two", CHATML, eos=[2, 0]), tasks)
    assert levels(several)["end tokens"] == "ok"
    assert text(several, "end tokens").startswith(
        "2 end tokens: <|endoftext|> (0), <|im_end|> (2); an assistant turn is closed by "
        "<|im_end|> (2)"
    )


def test_a_turn_closed_by_a_token_that_does_not_end_generation(tmp_path, tasks):
    """A base model's shape: end token <|endoftext|>, ChatML turns closed by <|im_end|>."""
    d = make_model(tmp_path, "base", CHATML, eos=0, eos_token="<|endoftext|>")
    r = check_model(d, tasks)
    assert [f.check for f in r.errors] == ["end tokens"]
    assert text(r, "end tokens").startswith(
        "the chat template closes an assistant turn with <|im_end|> (2), not an end token "
        "(<|endoftext|> (0))"
    )
    none = check_model(make_model(tmp_path, "none", CHATML, eos=None, eos_token=None), tasks)
    assert text(none, "end tokens").startswith("no end token")


def test_system_role_rejected_or_dropped(tmp_path, tasks, data_dir, capsys):
    d = make_model(tmp_path, "nosys", NO_SYSTEM)
    assert main(["models", "check", str(d), "--split", "valid", "--data", data_dir]) == 2
    cap = capsys.readouterr()
    assert cap.err == (
        "jacrl: models check: system role: the chat template fails on [system, "
        "user]: System role not supported (every stage sends the system "
        "prompt)\n"
    )
    assert "error  system role" in cap.out
    r = check_model(make_model(tmp_path, "drop", DROPS_SYSTEM), tasks)
    assert [f.check for f in r.errors] == ["system role"]
    assert "drops the system message" in text(r, "system role")
    r = check_model(make_model(tmp_path, "notemplate", None), tasks)
    assert [f.check for f in r.errors] == ["chat template"]


def test_sft_prompt_that_differs_from_evaluation(tmp_path, tasks):
    r = check_model(make_model(tmp_path, "role", OTHER_ROLE), tasks)
    assert [f.check for f in r.errors] == ["same prompt"]
    assert "SFT's masked prompt differs from eval's at token" in text(r, "same prompt")


def test_thinking_template(tmp_path, tasks):
    d = make_model(tmp_path, "think", THINKING, think=True)
    r = check_model(d, tasks)
    assert not r.errors  # the three stages agree (all with thinking on)
    assert levels(r)["thinking"] == "warn"
    t = text(r, "thinking")
    assert "mlx-lm passes enable_thinking=True" in t and "<think> ... </think>" in t
    assert "SFT targets start '<think>" in t
    assert "enable_thinking=False would append '<think>\\n\\n</think>\\n\\n'" in t
    # the same template with no think tokens in the vocabulary: mlx-lm turns thinking off
    r = check_model(make_model(tmp_path, "nothink", THINKING), tasks)
    assert levels(r)["thinking"] == "ok" and "template honours it" in text(r, "thinking")
    # think tokens and no switch in the template: the model may think anyway
    r = check_model(make_model(tmp_path, "always", CHATML, think=True), tasks)
    assert levels(r)["thinking"] == "warn" and "no enable_thinking switch" in text(r, "thinking")


def test_limits_the_run_would_hit(tasks):
    r = check_model(
        "jac-tiny",
        tasks,
        configs={"grpo": GRPOConfig(max_seq_length=100), "sft": SFTConfig(max_seq_length=200)},
        ev=EvalConfig(max_tokens=20),
    )
    assert [f.check for f in r.errors] == ["prompt length", "token budget"]
    pl, tb = text(r, "prompt length"), text(r, "token budget")
    assert "> grpo.max_seq_length 100" in pl and "> sft.max_seq_length 200 (" in pl
    assert "> eval.max_tokens 20: a correct answer would be cut off" in tb
    assert "grpo.max_completion_length" not in tb  # 512 fits
    assert (
        levels(check_model("jac-tiny", tasks, ev=EvalConfig(max_tokens=1900)))["positions"]
        == "warn"
    )


# Every stage's token limits, by hand from jacrl.config (RFT and STaR train a nested SFT config)
LIMITS = {
    "prompt length": [
        "sft.max_seq_length 2048",
        "rft.sft.max_seq_length 2048",
        "star.sft.max_seq_length 2048",
        "grpo.max_seq_length 1280",
        "dpo.max_seq_length 2048",
    ],
    "token budget": [
        "eval.max_tokens 512",
        "rft.max_tokens 512",
        "star.max_tokens 512",
        "grpo.max_completion_length 512",
        "dpo.max_tokens 512",
    ],
}


def test_every_stages_limits_are_checked(tasks):
    r = check_model("jac-tiny", tasks)
    assert not r.errors
    for check, limits in LIMITS.items():
        for limit in limits:
            assert limit in text(r, check), (check, limit)


def test_a_dpo_budget_too_small_is_reported(data_dir, capsys):
    args = ["models", "check", "jac-tiny", "--split", "valid", "--data", data_dir]
    assert main([*args, "--set", "dpo.max_tokens=8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jacrl: models check: token budget: the longest gold answer (")
    assert err.endswith("> dpo.max_tokens 8: a correct answer would be cut off\n"), err
    assert main([*args, "--set", "rft.sft.max_seq_length=8"]) == 2
    err = capsys.readouterr().err
    assert "tokens > sft.max_seq_length" not in err  # only the stage whose limit it is
    assert (
        "> rft.sft.max_seq_length 8 (its end would be cut off; raise rft.sft.max_seq_length)" in err
    )


def test_unusable_models_are_one_line_errors(tmp_path, tasks, capsys):
    d = make_model(tmp_path, "arch", CHATML)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "no_such_arch"}))
    r = check_model(d, tasks)
    assert [f.check for f in r.errors] == ["architecture"]
    broken = make_model(tmp_path, "broken", CHATML)
    (broken / "tokenizer.json").write_text("{")
    with pytest.raises(ModelError, match="cannot load its tokenizer"):
        check_model(broken, tasks)
    with pytest.raises(ModelError, match="cannot load its tokenizer"):  # the loader evaluation uses
        load_tokenizer(broken)
    garbled = make_model(tmp_path, "garbled", CHATML)
    (garbled / "config.json").write_text('{"model_type": "qwen2",')
    with pytest.raises(ModelError, match=r"garbled/config.json: not JSON \(") as e:
        check_model(garbled, tasks)
    assert "\n" not in str(e.value)
    nowhere = tmp_path / "nowhere"
    capsys.readouterr()
    assert main(["models", "check", str(nowhere)]) == 2
    assert capsys.readouterr().err.startswith("jacrl: models check: unknown model")
    shutil.rmtree(d)
