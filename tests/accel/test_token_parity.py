"""Token parity for generations: per request, where the outputs part, how far the drift goes, lengths that differ."""

from __future__ import annotations

import json
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promote.accel.tokens import diverge
from promote.core.errors import EXIT_BLOCKED, EXIT_UNDECIDED
from tests.helpers.cli import run, run_json
from tests.helpers.packages import write_config

PY = json.dumps(sys.executable)

# Twelve requests of 48 tokens each; MODE picks what the switched-on run (FAST=1) does differently.
GENERATE = """
import json, os, sys
out, mode, fast = sys.argv[1], sys.argv[2], os.environ["FAST"] == "1"
requests = [[(11 * i + 3 * r) % 97 for i in range(48)] for r in range(12)]
if fast and mode in ("drift", "lines"):
    for r, start in ((2, 29), (5, 35), (9, 40)):
        requests[r][start:] = [(t + 1) % 97 if i % 2 == 0 or r != 9 else t for i, t in enumerate(requests[r][start:])]
if fast and mode == "ragged":
    requests[4] = requests[4][:20]  # end of sequence reached early with the path on
if mode in ("drift", "ragged"):
    json.dump(requests, open(out, "w"))
elif mode == "lines":
    with open(out, "w") as f:
        for r, tokens in enumerate(requests):
            f.write(json.dumps({"request": {"prompt": f"p{r}"}, "tokens": tokens}) + "\\n")
elif mode == "missing":
    with open(out, "w") as f:
        for r in range(3 if fast else 4):
            f.write(json.dumps({"request": f"r{r}", "tokens": [1, 2, 3]}) + "\\n")
elif mode == "floats":
    json.dump([[0.5, 1.5]] if fast else [[1, 2]], open(out, "w"))
"""


def parity(root: Path, mode: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
    config = write_config(root, [])
    config.write_text(
        config.read_text()
        + '[[promote.accelerations]]\nname = "Fast"\nswitch = { env = "FAST", on = "1", off = "0" }\n'
        f'parity = {{ command = [{PY}, "generate.py", "{{out}}", "{mode}"] }}\n'
    )
    (root / "generate.py").write_text(GENERATE)
    code, data = run_json(root, "accel")
    jsonschema.validate(data, json.loads(files("promote").joinpath("schemas/accel.schema.json").read_text("utf-8")))
    return code, data, data["accelerations"][0]["parity"]


def test_a_drift_is_measured_per_request_from_where_it_starts(tmp_path: Path) -> None:
    code, data, p = parity(tmp_path, "drift")

    assert (code, p["verdict"], p["tokens"]) == (EXIT_BLOCKED, "differs", True)
    parted = {r["request"]: r for r in p["requests"] if r["verdict"] == "differs"}
    assert {r: (v["first_divergence"], v["differing"]) for r, v in parted.items()} == {
        2: (29, 19), 5: (35, 13), 9: (40, 4),
    }  # fmt: skip
    assert all(r["length_off"] == r["length_on"] == 48 for r in p["requests"])
    assert len(p["requests"]) == 12 and (p["total"], p["mismatched"]) == (12 * 48, 36)
    # Token ids are labels: no distance between them is reported.
    assert (p["max_abs_diff"], p["max_ulp"]) == (None, None)
    [finding] = [f for f in data["findings"] if f["check"] == "parity-differs"]
    assert finding["severity"] == "error"
    assert finding["message"].startswith(
        "output differs from token 29 of request 2: 3 of 12 requests differ, first at tokens 29, 35, 40"
    )
    assert "ULP" not in finding["message"] and "abs diff" not in finding["message"]
    assert "no quality yardstick is configured" in finding["message"]
    text = run(tmp_path, "accel").stdout
    assert "3 of 12 requests differ, first at tokens 29, 35, 40; 36 of 576 token positions differ" in text
    assert "ULP" not in text
    table = [" ".join(line.split()) for line in text.splitlines()]
    assert "9 40 4 48 48" in table and "2 29 19 48 48" in table


def test_a_request_that_ends_early_is_a_difference_of_length_and_the_others_are_identical(tmp_path: Path) -> None:
    code, _, p = parity(tmp_path, "ragged")

    assert (code, p["verdict"]) == (EXIT_BLOCKED, "differs")
    [short] = [r for r in p["requests"] if r["verdict"] == "differs"]
    assert short == {
        "request": 4, "verdict": "differs", "first_divergence": 20, "differing": 28, "length_off": 48, "length_on": 20,
    }  # fmt: skip
    assert sum(r["verdict"] == "identical" for r in p["requests"]) == 11


def test_json_lines_pair_requests_by_their_request(tmp_path: Path) -> None:
    code, _, p = parity(tmp_path, "lines")

    assert (code, p["verdict"]) == (EXIT_BLOCKED, "differs")
    parted = [r["request"] for r in p["requests"] if r["verdict"] == "differs"]
    assert parted == ['{"prompt": "p2"}', '{"prompt": "p5"}', '{"prompt": "p9"}']


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("missing", 'request "r3" is only in the parity output with the switch off'),
        ("floats", "the parity output with the switch on is JSON but not a list of token ids"),
    ],
)
def test_an_output_that_cannot_be_paired_is_named_by_its_role_never_its_temporary_path(
    tmp_path: Path, mode: str, says: str
) -> None:
    code, _, p = parity(tmp_path, mode)

    assert (code, p["verdict"]) == (EXIT_UNDECIDED, "error")
    assert says in p["error"] and "promote-parity-" not in p["error"] and "generate.py '{out}'" in p["error"]


@pytest.mark.parametrize(
    ("off", "on", "expected"),
    [
        ((1, 2, 3), (1, 2, 3), (None, 0)),
        ((1, 2, 3), (1, 9, 3), (1, 1)),
        ((1, 2, 3, 4), (1, 2), (2, 2)),
        ((), (5,), (0, 1)),
        ((1, 2, 3, 4, 5), (1, 2, 7, 4, 8, 6), (2, 3)),
    ],
)
def test_the_first_divergence_and_the_positions_after_it(
    off: tuple[int, ...], on: tuple[int, ...], expected: tuple[int | None, int]
) -> None:
    found = diverge(0, off, on)
    assert (found.first_divergence, found.differing) == expected
    assert (found.length_off, found.length_on) == (len(off), len(on))


def test_json_lines_with_a_brace_where_safetensors_keeps_its_header_are_still_token_ids(tmp_path: Path) -> None:
    from promote.accel.arrays import read_output

    out = tmp_path / "out"
    out.write_text('{"abc": {}, "request": "r0", "tokens": [4, 5, 6]}\n')
    assert out.read_bytes()[8:9] == b"{"  # where a safetensors file's JSON header starts

    found = read_output(out, "the parity output with the switch on")

    assert found.generations is not None and found.generations.requests == (("r0", (4, 5, 6)),)
