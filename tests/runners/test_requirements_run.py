"""Requirements end to end: the plugin's skips and records, then `promote test` on a package in tmp_path."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from promote.config import RequirementsConfig
from promote.core.station import Station
from promote.runners.plugin.requirement_rules import infer_failure
from promote.runners.requirements import rules_of
from tests.helpers.cli import run, run_json
from tests.helpers.packages import write_package
from tests.runners.support import record

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]
mx = pytest.importorskip("mlx.core")
pytest.importorskip("huggingface_hub")
HAS_GPU = mx.metal.is_available() or mx.is_available(mx.gpu)

CONFTEST = """
    import os
    import pytest

    @pytest.fixture(scope="module")
    def big_model():
        with open(os.path.join(os.environ["MODELS"], "qwen3-27b-4bit", "config.json")) as f:
            return f.read()
"""

TESTS = """
    import os
    import pytest
    from huggingface_hub import hf_hub_download, snapshot_download

    OTHER = "org/other-model"

    def fetch(repo):
        return hf_hub_download(repo, "config.json")

    def test_hub():
        snapshot_download(repo_id="mlx-community/not-cached-4bit")

    def test_hub_indirect():
        fetch(OTHER)

    def test_big_1(big_model):
        pass

    def test_big_2(big_model):
        pass

    def test_checkpoint_file():
        import mlx.core as mx
        mx.load(os.path.join(os.environ["MODELS"], "llama-70b", "model.safetensors"))

    def test_metal():
        import mlx.core as mx
        mx.set_default_device(mx.gpu)
        mx.set_default_device(mx.cpu)

    @pytest.mark.requires("checkpoint:qwen3-27b-4bit", device="metal", memory_gb=64)
    def test_declared():
        raise AssertionError("a test its station cannot run must not start")

    def test_missing_module():
        import flash_attn_mlx

    def test_genuine():
        assert 1 + 1 == 3

    def test_passes():
        pass
"""


def offline_env(tmp_path: Path) -> dict[str, str]:
    # An empty Hugging Face home: nothing real is read, and offline mode downloads nothing.
    return {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-empty"), "MODELS": str(tmp_path / "models")}


def test_plugin_skips_what_the_station_lacks_and_records_requirements_fixture_and_excerpt(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in offline_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    pytester.makeconftest(CONFTEST)
    bad_marker = "\n@pytest.mark.requires(gpu=True)\ndef test_bad_marker():\n    pass\n"
    pytester.makepyfile(test_req=textwrap.dedent(TESTS) + bad_marker)
    station = pytester.path / "station.json"
    station.write_text(json.dumps(Station("dev", "linux-x86_64", ("cpu",), 16.0, local=True).to_json()))

    tests = record(pytester, "--promote-station", str(station), subprocess=True).tests()

    declared = tests["test_req.py::test_declared"]
    assert (declared.outcome, declared.requirements) == (
        "skipped",
        ("checkpoint:qwen3-27b-4bit", "device:metal", "memory:64"),
    )
    assert declared.skip_reason == (
        "Skipped: requires checkpoint:qwen3-27b-4bit, device:metal, memory:64: not on station dev"
    )
    assert [tests[f"test_req.py::test_big_{i}"].fixture for i in (1, 2)] == ["conftest.py::big_model"] * 2
    assert tests["test_req.py::test_hub"].fixture is None
    bad = tests["test_req.py::test_bad_marker"]
    assert bad.outcome == "error" and "unknown keyword 'gpu'" in (bad.longrepr or "")
    # The excerpt keeps what names the repo even where the long traceback is cut.
    rules = rules_of(RequirementsConfig())
    hub, indirect = tests["test_req.py::test_hub"], tests["test_req.py::test_hub_indirect"]
    assert infer_failure(hub.excerpt or "", rules) == "hub:mlx-community/not-cached-4bit"
    assert infer_failure(indirect.excerpt or "", rules) == "hub:org/other-model"
    assert len(hub.excerpt or "") < len(hub.longrepr or "")


def write_project(root: Path, training_resources: list[str]) -> None:
    write_package(root, "req", {"conftest.py": CONFTEST, "test_req.py": TESTS})
    env = ", ".join(f'{k} = "{v}"' for k, v in offline_env(root).items())
    resources = ", ".join(f'"{r}"' for r in training_resources)
    (root / "promote.toml").write_text(
        f'[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "req"\npath = "req"\nenv = {{ {env} }}\n\n'
        f'[promote.stations.training]\nplatform = "darwin-arm64"\ndevices = ["metal", "cpu"]\nmemory_gb = 128\n'
        f'resources = [{resources}]\nssh = "bert@training.local"\n\n'
        '[promote.requirements]\nmodel_dirs = ["models"]\n'
    )
    (root / "models").mkdir()


BOUND_CHECKPOINT = ("station-bound", ["checkpoint:qwen3-27b-4bit"], ["training"], "conftest.py::big_model")
NO_CHECKPOINT = ("impossible-requirement", ["checkpoint:qwen3-27b-4bit"], [], "conftest.py::big_model")


@pytest.mark.parametrize(
    ("resources", "big", "declared"),
    [
        (
            ["checkpoint:qwen3-27b-4bit"],
            BOUND_CHECKPOINT,
            ("station-bound", ["checkpoint:qwen3-27b-4bit", "device:metal", "memory:64"], ["training"], None),
        ),
        # Metal and 64 GB are on training; the checkpoint alone is nowhere, so it alone is named.
        ([], NO_CHECKPOINT, ("impossible-requirement", ["checkpoint:qwen3-27b-4bit"], [], None)),
    ],
    ids=["training-has-the-checkpoint", "no-station-has-it"],
)
def test_promote_test_blocks_what_no_station_or_only_some_can_run_and_keeps_genuine_failures(
    tmp_path: Path, resources: list[str], big: tuple[object, ...], declared: tuple[object, ...]
) -> None:
    write_project(tmp_path, resources)

    result = run(tmp_path, "test")
    human = result.stdout
    # The run's stored JSON is what `--json` prints; one run serves both.
    results = Path(next(line for line in human.splitlines() if line.startswith("results: ")).split(": ", 1)[1])
    report = json.loads((results / "run.json").read_text())

    assert result.exit_code == 1
    pkg = report["packages"][0]
    metal = [] if HAS_GPU else [("test_req.py::test_metal", ("station-bound", ["device:metal"], ["training"], None))]
    expected = [
        ("test_req.py::test_hub", ("impossible-requirement", ["hub:mlx-community/not-cached-4bit"], [], None)),
        ("test_req.py::test_hub_indirect", ("impossible-requirement", ["hub:org/other-model"], [], None)),
        ("test_req.py::test_big_1", big),
        ("test_req.py::test_big_2", big),
        ("test_req.py::test_checkpoint_file", ("impossible-requirement", ["checkpoint:llama-70b"], [], None)),
        *metal,
        ("test_req.py::test_declared", declared),
        ("test_req.py::test_missing_module", ("missing-package", ["package:flash_attn_mlx"], [], None)),
    ]
    blocked = [(b["test"], (b["check"], b["requirements"], b["stations"], b["fixture"])) for b in pkg["blockers"]]
    assert blocked == expected
    passed = 2 if HAS_GPU else 1
    assert (pkg["passed"], pkg["failed"], pkg["errors"], pkg["skipped"], pkg["blocked"]) == (
        passed,
        1,
        0,
        0,
        8 + 1 - passed,
    )
    # Blocked tests are not rerun or bisected; the genuine failure is.
    assert [r["test"] for r in pkg["reruns"]] == ["test_req.py::test_genuine"]
    assert pkg["blocked_by"]["hub:org/other-model"] == 1
    assert report["stations"]["local"] == "local"
    checks = {f["check"] for f in report["findings"]}
    assert checks >= {"impossible-requirement", "missing-package"}
    assert "  req: 1 blocked: hub:mlx-community/not-cached-4bit not on any station" in human.splitlines()
    lines = human.splitlines()
    failed = lines[lines.index("failed:") + 1 : lines.index("findings:") - 1]
    assert failed == ["  req: test_req.py::test_genuine (failed)"]


HOLDERS = {
    "tests/conftest.py": """
        import pytest
        from huggingface_hub import hf_hub_download

        @pytest.fixture(scope="module")
        def plain_model():
            return hf_hub_download("org/fixture-model", "config.json")
    """,
    "tests/test_gen.py": """
        import unittest
        from huggingface_hub import snapshot_download

        class TestGen(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                cls.path = snapshot_download(repo_id="mlx-community/shared-4bit")

            def test_a(self):
                pass

            def test_b(self):
                pass

            def test_c(self):
                pass
    """,
    "tests/test_cache.py": """
        import unittest
        from huggingface_hub import snapshot_download

        class TestCache(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                snapshot_download(repo_id="mlx-community/shared-4bit")

            def test_d(self):
                pass

            def test_e(self):
                pass
    """,
    "tests/test_mod.py": """
        from huggingface_hub import hf_hub_download

        def setUpModule():
            hf_hub_download("org/module-model", "config.json")

        def test_m():
            pass
    """,
    "tests/test_fix.py": """
        def test_f(plain_model):
            pass
    """,
    "tests/test_xunit.py": """
        from huggingface_hub import hf_hub_download

        class TestX:
            @classmethod
            def setup_class(cls):
                hf_hub_download("org/xunit-model", "config.json")

            def test_x(self):
                pass
    """,
}


def test_a_requirement_is_attributed_to_the_package_code_that_holds_it_and_reported_once(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", HOLDERS)
    env = ", ".join(f'{k} = "{v}"' for k, v in offline_env(tmp_path).items() if k != "MODELS")
    (tmp_path / "promote.toml").write_text(
        f'[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\nenv = {{ {env} }}\n'
    )

    code, report = run_json(tmp_path, "test")

    assert code == 1
    fixtures = {b["test"]: b["fixture"] for b in report["packages"][0]["blockers"]}
    gen, cache = "tests/test_gen.py::TestGen::setUpClass", "tests/test_cache.py::TestCache::setUpClass"
    assert fixtures == {
        **{f"tests/test_gen.py::TestGen::test_{n}": gen for n in "abc"},
        **{f"tests/test_cache.py::TestCache::test_{n}": cache for n in "de"},
        "tests/test_mod.py::test_m": "tests/test_mod.py::setUpModule",
        "tests/test_fix.py::test_f": "tests/conftest.py::plain_model",
        "tests/test_xunit.py::TestX::test_x": "tests/test_xunit.py::TestX::setup_class",
    }
    found = [(f["subject"], f["cause"]) for f in report["findings"] if f["check"] == "impossible-requirement"]
    # One finding per requirement: the shared model's names both classes, its main holder the subject.
    assert sorted(found) == sorted(
        [
            (gen, gen),
            ("tests/test_mod.py::setUpModule", "tests/test_mod.py::setUpModule"),
            ("tests/conftest.py::plain_model", "tests/conftest.py::plain_model"),
            ("tests/test_xunit.py::TestX::setup_class", "tests/test_xunit.py::TestX::setup_class"),
        ]
    )
    shared = next(f["message"] for f in report["findings"] if f["subject"] == gen)
    assert shared.startswith(
        "needs hub:mlx-community/shared-4bit, which no station here has: it cannot run on this fleet; 5 test(s) via "
    )
    assert f"{gen} (3), {cache} (2): " in shared


PYTEST_MAJOR = int(pytest.__version__.split(".")[0])

SUBTESTS = {
    "tests/test_tok.py": """
        import unittest

        from huggingface_hub import snapshot_download

        REPOS = ["org/tok-a", "org/tok-b", "org/tok-c", "org/shared"]

        def load(repo):
            return snapshot_download(repo_id=repo, allow_patterns=["tokenizer.json"])

        class TestTok(unittest.TestCase):
            def test_tokenizers(self):
                for repo in REPOS:
                    with self.subTest(tokenizer=repo):
                        load(repo)
                load("org/tok-last")

            def test_only_subtests(self):
                for repo in ["org/tok-d", "org/tok-e"]:
                    with self.subTest(repo=repo):
                        load(repo)

            def test_one_real_failure(self):
                for n in [1, 2]:
                    with self.subTest(n=n):
                        if n == 1:
                            load("org/tok-f")
                        else:
                            self.assertEqual(n, 3)

            def test_uses_shared(self):
                load("org/shared")
        """,
}


def test_every_hub_model_a_subtest_reaches_is_named_and_its_subtest_blocked_not_failed(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", SUBTESTS)
    env = ", ".join(f'{k} = "{v}"' for k, v in offline_env(tmp_path).items() if k != "MODELS")
    (tmp_path / "promote.toml").write_text(
        f'[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\nenv = {{ {env} }}\n'
    )

    code, report = run_json(tmp_path, "test")

    assert code == 1
    pkg = report["packages"][0]
    if PYTEST_MAJOR < 9:
        # pytest 8 reports no subtest of its own: a unittest test stops at its first failing subTest, as under
        # plain pytest, so each test is blocked by the first model it reached and nothing else is seen.
        assert (pkg["subtests"], pkg["passed"], pkg["failed"], pkg["blocked"]) == ({}, 0, 0, 4)
        assert pkg["blocked_by"] == {f"hub:org/{x}": 1 for x in ("tok-f", "tok-d", "tok-a", "shared")}
        found = {f["subject"]: f["message"] for f in report["findings"] if f["check"] == "impossible-requirement"}
        assert found["tests/test_tok.py::TestTok::test_tokenizers"] == (
            "needs hub:org/tok-a, which no station here has: it cannot run on this fleet"
        )
        return
    # Every subtest that needed a model is blocked; the one that asserted stays failed, and so does its test.
    assert pkg["subtests"] == {"blocked": 7, "failed": 1}
    assert (pkg["passed"], pkg["failed"], pkg["blocked"]) == (0, 1, 3)
    top = "tests/test_tok.py::TestTok::test_tokenizers"
    blockers = {b["test"]: (b["requirements"], b["parent"]) for b in pkg["blockers"]}
    assert blockers[top] == ([f"hub:org/tok-{x}" for x in ("last", "a", "b", "c")] + ["hub:org/shared"], None)
    assert blockers[f"{top} (tokenizer='org/tok-b')"] == (["hub:org/tok-b"], top)
    assert pkg["blocked_by"]["hub:org/shared"] == 1  # the other test; the subtest is not counted as a test
    found = {f["subject"]: f["message"] for f in report["findings"] if f["check"] == "impossible-requirement"}
    # The models only one test reaches are that test's one finding, each with its subtest.
    assert found[top] == (
        "needs hub:org/tok-last and hub:org/tok-a and hub:org/tok-b and hub:org/tok-c, which no station here has: "
        f"it cannot run on this fleet; 3 subtest(s) of {top}: (tokenizer='org/tok-a') needs hub:org/tok-a, "
        "(tokenizer='org/tok-b') needs hub:org/tok-b, (tokenizer='org/tok-c') needs hub:org/tok-c; "
        "the test itself needs hub:org/tok-last"
    )
    only = "tests/test_tok.py::TestTok::test_only_subtests"
    assert found[only].startswith("needs hub:org/tok-d and hub:org/tok-e, which no station here has")
    assert found["tests/test_tok.py::TestTok::test_one_real_failure"].endswith("(n=1) needs hub:org/tok-f")
    # A model two tests reach is one finding naming the test and the subtest.
    assert found["tests/test_tok.py::TestTok"] == (
        "needs hub:org/shared, which no station here has: it cannot run on this fleet; "
        "1 test(s) via tests/test_tok.py::TestTok (1): "
        f"tests/test_tok.py::TestTok::test_uses_shared; 1 subtest(s): {top} (tokenizer='org/shared')"
    )
    # The terminal's list of failures is the one subtest that failed for itself (and its test).
    lines = run(tmp_path, "test").stdout.splitlines()
    failed = lines[lines.index("failed:") + 1 : lines.index("findings:") - 1]
    assert failed == [
        "  pkg: tests/test_tok.py::TestTok::test_one_real_failure (failed)",
        "  pkg: tests/test_tok.py::TestTok::test_one_real_failure (n=2) (failed)",
    ]


def test_blocked_tests_are_listed_in_collection_order_whichever_worker_ran_each(tmp_path: Path) -> None:
    # Two workers take the tests in turns and report as they finish: read worker by worker, the ids would run
    # 0-4, then what the first worker took next, then 5-9; two runs of one commit would list them differently.
    tests = """
        import pytest

        @pytest.mark.requires("checkpoint:nowhere-4bit")
        @pytest.mark.parametrize("n", range(40))
        def test_needs(n):
            raise AssertionError("a test no station can run must not start")
    """
    write_package(tmp_path, "pkg", {"tests/test_needs.py": tests})
    (tmp_path / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\nworkers = 2\n'
    )

    code, report = run_json(tmp_path, "test")

    assert code == 1
    listed = [b["test"] for b in report["packages"][0]["blockers"]]
    assert listed == [f"tests/test_needs.py::test_needs[{n}]" for n in range(40)]
    (message,) = [f["message"] for f in report["findings"] if f["check"] == "impossible-requirement"]
    assert message.endswith(
        ": tests/test_needs.py::test_needs[0], tests/test_needs.py::test_needs[1], "
        "tests/test_needs.py::test_needs[2] (+37 more)"
    ), message
