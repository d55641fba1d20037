"""A team's package serving mlx-lm speculative decoding behind `SPEC_DECODE`, with tiny random-weight models on disk.

The package is what a user of promote would write: a handler that drafts with a small model and verifies with the
target (plain `generate_step` when switched off or sampling), the ledger writer copied from promote, its own tests,
a parity command and a bench. Its models are built once from fixed seeds with the demo's model helper and saved
the way mlx-lm saves a converted checkpoint, so every process loads them from disk as a serving box would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from importlib.resources import files
from pathlib import Path

from promote.demo import build as demo_build

NAME = "spec-decode"
SWITCH = "SPEC_DECODE"
PACKAGE = "spec"
# Requests each command serves: parity's prompts, the bench's per run, the greedy ones the package's tests make.
# Parity's three prompts ask for different lengths: one list of token ids per prompt, ragged, as a team writes it.
PARITY_LENGTHS = (16, 16, 9)
PARITY_REQUESTS = len(PARITY_LENGTHS)
PARITY_TOKENS = sum(PARITY_LENGTHS)
BENCH_REQUESTS = 2
TEST_GREEDY_REQUESTS = 3
TESTS = 6

SERVE = '''
"""Completions for the team's target model; speculative decoding (a draft model proposes, the target verifies)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.generate import generate_step, speculative_generate_step
from mlx_lm.sample_utils import make_sampler
from mlx_lm.utils import load_model

from specserve import ledger
from specserve.model import seeded

NAME = "spec-decode"
SWITCH = "SPEC_DECODE"
DRAFT_TOKENS = 3
MODELS = Path(__file__).resolve().parent.parent / "models"


@dataclass(frozen=True)
class Reply:
    tokens: tuple[int, ...]
    path: str  # "speculative" or "plain"
    drafted: int = 0  # tokens the draft model proposed
    accepted: int = 0  # of those, tokens the target kept


@cache
def models() -> tuple[nn.Module, nn.Module]:
    target, _ = load_model(MODELS / "target")
    draft, _ = load_model(MODELS / "draft")
    return target, draft


def drafting() -> bool:
    # Read per request, so the switch turns the path off on a running server without a rebuild.
    return os.environ.get(SWITCH, "1") != "0"


def declines(temperature: float) -> str | None:
    if not drafting():
        return f"{SWITCH}=0: speculative decoding is switched off"
    if temperature > 0:
        return f"temperature {temperature:g} > 0: only greedy drafts are verified exactly"
    return None


def plain(target: nn.Module, prompt: list[int], max_tokens: int, temperature: float, seed: int = 0) -> tuple[int, ...]:
    # Seeded, so that sampling neither depends on nor disturbs anyone else's random state.
    with seeded(seed):
        steps = generate_step(mx.array(prompt), target, max_tokens=max_tokens, sampler=make_sampler(temp=temperature))
        return tuple(int(token) for token, _ in steps)


def proposed(flags: list[bool], max_tokens: int) -> int:
    # mlx-lm drafts min(DRAFT_TOKENS, tokens still wanted) a round, yields the drafts the target kept, then one
    # token of the target's own (unless the request is complete): replaying that schedule counts the proposals.
    total = pos = 0
    while pos < len(flags):
        wanted = min(DRAFT_TOKENS, max_tokens - pos)
        total += wanted
        kept = 0
        while pos < len(flags) and flags[pos] and kept < wanted:
            pos, kept = pos + 1, kept + 1
        if pos < len(flags) and not flags[pos]:
            pos += 1
    return total


def speculate(target: nn.Module, draft: nn.Module, prompt: list[int], max_tokens: int) -> Reply:
    steps = speculative_generate_step(
        mx.array(prompt), target, draft, num_draft_tokens=DRAFT_TOKENS, max_tokens=max_tokens
    )
    tokens, flags = [], []
    for token, _, from_draft in steps:
        tokens.append(int(token))
        flags.append(bool(from_draft))
    return Reply(tuple(tokens), "speculative", proposed(flags, max_tokens), sum(flags))


def serve(prompt_ids: list[int], max_tokens: int, temperature: float = 0.0, *, seed: int = 0) -> Reply:
    started = time.perf_counter()
    request = {"temperature": temperature, "max_tokens": max_tokens, "prompt_tokens": len(prompt_ids)}
    target, draft = models()
    reason = declines(temperature)
    if reason is None:
        reply = speculate(target, draft, prompt_ids, max_tokens)
        seconds = time.perf_counter() - started
        ledger.record(NAME, "served", seconds=seconds, request=request, drafted=reply.drafted, accepted=reply.accepted)
        return reply
    reply = Reply(plain(target, prompt_ids, max_tokens, temperature, seed), "plain")
    ledger.record(NAME, "declined", reason=reason, seconds=time.perf_counter() - started, request=request)
    return reply
'''

BUILD = '''
"""`python -m specserve.build`: the target and its draft, random weights from fixed seeds, saved as mlx-lm saves."""

import dataclasses

from mlx_lm.utils import save_config, save_model

from specserve.model import tiny_llama
from specserve.serve import MODELS

# The draft shares the target's vocabulary (tiny_llama's), at a quarter of its width and half its depth.
MADE = {"target": tiny_llama(seed=0, hidden=64, layers=2), "draft": tiny_llama(seed=1, hidden=32, layers=1)}
for name, model in MADE.items():
    save_model(MODELS / name, model)
    save_config(dataclasses.asdict(model.args), MODELS / name / "config.json")
'''

PARITY = f'''
"""`python -m specserve.parity --out FILE`: greedy answers to fixed prompts, token ids per request (JSON)."""

import argparse
import json

from specserve.serve import serve

PROMPTS = ([1, 2, 3, 4, 5], [10, 20, 30], list(range(40)))

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()
answers = [list(serve(prompt, max_tokens=n).tokens) for prompt, n in zip(PROMPTS, {PARITY_LENGTHS})]
with open(args.out, "w", encoding="utf-8") as f:
    json.dump(answers, f)
'''

BENCH = '''
"""`python -m specserve.bench [--workload NAME] [--out FILE]`: greedy requests, the work drafting should speed up."""

import argparse
import json
import time

from specserve.serve import models, serve

# Prompts the random draft model mostly agrees with the target on, and prompts it never does.
WORKLOADS = {"agree": ([3, 1, 4, 1, 5], list(range(20))), "disagree": ([10, 20, 30], [4, 5, 6])}

parser = argparse.ArgumentParser()
parser.add_argument("--workload", choices=sorted(WORKLOADS), default="agree")
parser.add_argument("--out")
args = parser.parse_args()
models()
started, made = time.perf_counter(), 0
for prompt in WORKLOADS[args.workload]:
    made += len(serve(prompt, max_tokens=12).tokens)
elapsed = time.perf_counter() - started
if args.out:
    # The path's own unit, for a bench that reads `metric = "tokens_per_s"` from {out}.
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"tokens_per_s": made / elapsed, "seconds": elapsed}, f)
'''

TESTS_PY = """
import json

from specserve import serve

VOCAB = 256


def test_a_greedy_request_is_answered_by_the_path_the_switch_chose():
    reply = serve.serve([1, 2, 3], max_tokens=8)
    assert len(reply.tokens) == 8 and all(0 <= t < VOCAB for t in reply.tokens)
    assert reply.path == ("speculative" if serve.drafting() else "plain")


def test_greedy_tokens_are_the_targets_own_either_way():
    target, _ = serve.models()
    assert serve.serve([4, 5, 6], max_tokens=12).tokens == serve.plain(target, [4, 5, 6], 12, 0.0)


def test_the_draft_counts_add_up():
    reply = serve.serve(list(range(30)), max_tokens=10)
    if reply.path == "speculative":
        assert 0 <= reply.accepted <= reply.drafted and reply.drafted >= 10 // (serve.DRAFT_TOKENS + 1)
    else:
        assert (reply.drafted, reply.accepted) == (0, 0)


class Counted:
    # The draft model, counting its forward passes.

    def __init__(self, model):
        self.model, self.layers, self.calls = model, model.layers, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.model(*args, **kwargs)


def test_the_drafted_count_is_what_the_draft_model_was_asked_to_propose():
    target, draft = serve.models()
    for prompt, max_tokens in (([1, 2, 3, 4, 5], 16), ([10, 20, 30], 16), (list(range(40)), 16)):
        counted = Counted(draft)
        reply = serve.speculate(target, counted, prompt, max_tokens)
        # One pass prefills the prompt; every other pass proposes one token.
        assert reply.drafted == counted.calls - 1 and 0 <= reply.accepted <= reply.drafted


def test_a_sampled_request_is_declined_and_answered_plainly_and_reproducibly():
    first = serve.serve([7, 8, 9], max_tokens=6, temperature=0.8, seed=3)
    assert first.path == "plain" and (first.drafted, first.accepted) == (0, 0)
    assert serve.serve([7, 8, 9], max_tokens=6, temperature=0.8, seed=3) == first


def test_each_request_appends_one_ledger_line(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("PROMOTE_LEDGER", str(ledger))
    serve.serve([2, 4], max_tokens=4)
    [line] = [json.loads(text) for text in ledger.read_text().splitlines()]
    assert line["accel"] == serve.NAME and line["request"]["max_tokens"] == 4
    assert line["outcome"] == ("served" if serve.drafting() else "declined")
"""

PYPROJECT = """
[project]
name = "spec"
version = "0.1.0"
dependencies = ["mlx", "mlx-lm"]

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]
addopts = "-p no:cacheprovider"
"""


def clean_env() -> dict[str, str]:
    """The environment without a switch or ledger of the caller's: promote sets what each run needs."""
    return {k: v for k, v in os.environ.items() if k not in (SWITCH, "SPEC_DRAFT", "PROMOTE_LEDGER")}


def write_package(root: Path, models: Path | None = None) -> Path:
    """The package under root/spec; its models copied from `models`, or built here (a process of its own)."""
    pkg = root / PACKAGE
    src = pkg / "specserve"
    (pkg / "tests").mkdir(parents=True)
    src.mkdir()
    sources = {
        src / "__init__.py": "", src / "serve.py": SERVE, src / "build.py": BUILD, src / "parity.py": PARITY,
        src / "bench.py": BENCH, pkg / "tests" / "test_serve.py": TESTS_PY, pkg / "pyproject.toml": PYPROJECT,
    }  # fmt: skip
    for path, text in sources.items():
        path.write_text(textwrap.dedent(text).lstrip())
    # The demo's tiny llama (mlx-lm's own model classes, seeded) and promote's stdlib ledger writer, as copies.
    model = demo_build.TEMPLATES / "sanctum/packages/sanctum-mlx/sanctum_mlx/model.py.tmpl"
    shutil.copyfile(model, src / "model.py")
    (src / "ledger.py").write_text(files("promote").joinpath("accel/ledger_writer.py").read_text("utf-8"))
    if models is not None:
        shutil.copytree(models, pkg / "models")
    else:
        subprocess.run([sys.executable, "-m", "specserve.build"], cwd=pkg, env=clean_env(), check=True)
    return pkg


def write_config(root: Path, *, switch: str = SWITCH, bench: bool = True) -> Path:
    """promote.toml: the package, and the path with its switch (a name the module never reads ignores it)."""
    lines = [
        "[promote]", 'trunk = "main"', "",
        "[[promote.packages]]", f'name = "{PACKAGE}"', f'path = "{PACKAGE}"', "",
        "[[promote.accelerations]]", f'name = "{NAME}"', f'package = "{PACKAGE}"',
        f'switch = {{ env = "{switch}", on = "1", off = "0" }}',
        'parity = { command = ["python", "-m", "specserve.parity", "--out", "{out}"] }',
    ]  # fmt: skip
    if bench:
        lines.append(
            'bench = { command = ["python", "-m", "specserve.bench", "--out", "{out}"], rounds = 5, warmup = 0, '
            'metric = "tokens_per_s", '
            'cases = { agree = ["--workload", "agree"], disagree = ["--workload", "disagree"] } }'
        )
    path = root / "promote.toml"
    path.write_text("\n".join([*lines, ""]))
    return path
