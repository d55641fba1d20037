"""The rule table on real exception texts, and the verdicts of tests matched against the stations."""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from promote import config
from promote.config import RequirementsConfig, RuleConfig
from promote.core.errors import ConfigError
from promote.core.findings import Finding
from promote.core.station import Station
from promote.runners.plugin.records import TestRecord
from promote.runners.plugin.requirement_rules import excerpt, infer_failure, infer_output, infer_skip
from promote.runners.requirements import blocked_summary, classify, outcome, rules_of
from promote.runners.stations import Inventory
from promote.runners.summary import PackageResult

RULES = rules_of(RequirementsConfig())


def failure_text(fn: Callable[[], object]) -> str:
    """The traceback of the real exception `fn` raises, as Python prints it."""
    try:
        fn()
    except Exception as e:
        return "".join(traceback.format_exception(type(e), e, e.__traceback__))
    raise AssertionError(f"{fn} did not raise")


def skip_reason(fn: Callable[[], object]) -> str:
    try:
        fn()
    except pytest.skip.Exception as e:
        return str(e.msg)
    raise AssertionError(f"{fn} did not skip")


def test_hub_model_not_in_the_cache_names_the_repo_from_the_call_since_the_message_lacks_it(tmp_path: Path) -> None:
    hub = pytest.importorskip("huggingface_hub")

    def load() -> object:
        return hub.snapshot_download(repo_id="mlx-community/not-cached", cache_dir=tmp_path, local_files_only=True)

    text = failure_text(load)

    assert "LocalEntryNotFoundError" in text and "not-cached" not in text.splitlines()[-1]
    assert infer_failure(text, RULES) == "hub:mlx-community/not-cached"


def test_hub_file_not_in_the_cache_names_the_repo_from_the_download_call(tmp_path: Path) -> None:
    hub = pytest.importorskip("huggingface_hub")
    text = failure_text(
        lambda: hub.hf_hub_download("org/tiny-model", "config.json", cache_dir=tmp_path, local_files_only=True)
    )

    assert infer_failure(text, RULES) == "hub:org/tiny-model"


def test_asking_mlx_for_the_gpu_without_one_needs_metal() -> None:
    mx = pytest.importorskip("mlx.core")
    if mx.metal.is_available() or mx.is_available(mx.gpu):
        pytest.skip("this machine has a GPU: MLX raises nothing")

    assert infer_failure(failure_text(lambda: mx.set_default_device(mx.gpu)), RULES) == "device:metal"
    assert infer_failure(failure_text(lambda: mx.zeros(1, stream=mx.gpu)), RULES) == "device:metal"


def test_a_missing_file_under_a_model_dir_needs_that_checkpoint_and_elsewhere_nothing(tmp_path: Path) -> None:
    mx = pytest.importorskip("mlx.core")
    models = tmp_path / "models"
    rules = rules_of(RequirementsConfig(model_dirs=(models,)))
    weights = models / "llama-70b" / "model.safetensors"

    assert infer_failure(failure_text(lambda: mx.load(str(weights))), rules) == "checkpoint:llama-70b"
    assert infer_failure(failure_text((models / "qwen3-27b-4bit" / "config.json").read_text), rules) == (
        "checkpoint:qwen3-27b-4bit"
    )
    assert infer_failure(failure_text((tmp_path / "other" / "config.json").read_text), rules) is None


def test_memory_exhaustion_needs_memory() -> None:
    assert infer_failure(failure_text(lambda: bytearray(2**62)), RULES) == "memory"
    assert infer_failure("E   RuntimeError: [metal::malloc] Attempting to allocate 80 GB", RULES) == "memory"


def test_a_missing_module_is_a_missing_package_but_a_missing_submodule_is_not() -> None:
    missing = failure_text(lambda: importlib.import_module("flash_attn_mlx"))
    submodule = failure_text(lambda: importlib.import_module("promote.no_such_module"))

    assert infer_failure(missing, RULES) == "package:flash_attn_mlx"
    assert infer_failure(submodule, RULES) is None


def test_a_genuine_assertion_failure_needs_nothing_whatever_it_mentions() -> None:
    def check() -> None:
        message = "MemoryError: No module named 'flash_attn_mlx' without gpu backend"
        assert message == "", message

    assert infer_failure(failure_text(check), RULES) is None
    rewritten = "E   assert 'No module named' in 'x'\nE   ModuleNotFoundError: No module named 'x'"
    assert infer_failure(rewritten, RULES) is None


def test_a_modules_own_last_words_name_the_packages_it_lacks_and_nothing_else_is_read_as_one() -> None:
    assert infer_output("checking optional packages\nMissing required packages: psutil, pynvml", RULES) == (
        "package:psutil",
        "package:pynvml",
    )
    assert infer_output("ERROR: please install the following dependencies: numpy and scipy", RULES) == (
        "package:numpy",
        "package:scipy",
    )
    # A traceback the module printed itself is read by the rule table.
    assert infer_output("ModuleNotFoundError: No module named 'lm_eval'", RULES) == ("package:lm_eval",)
    assert infer_output("config is broken: exiting\n3 packages installed", RULES) == ()


def test_skip_reasons_are_read_by_the_same_rules() -> None:
    assert infer_skip(skip_reason(lambda: pytest.importorskip("flash_attn_mlx")), RULES) == "package:flash_attn_mlx"
    assert infer_skip("Skipped: could not import 'mlx_vlm': No module named 'mlx_vlm'", RULES) == "package:mlx_vlm"
    assert infer_skip("requires Metal", RULES) == "device:metal"
    assert infer_skip("not on this box", RULES) is None


def test_user_rules_come_first_and_fill_their_template_from_the_frames() -> None:
    rule = RuleConfig(r"^LookupError: dataset missing", "dataset:{name}", (r"load_dataset\(['\"](?P<name>[\w-]+)",))
    rules = rules_of(RequirementsConfig(rules=(rule,)))

    def load_dataset(name: str) -> None:
        raise LookupError("dataset missing")

    assert infer_failure(failure_text(lambda: load_dataset("evals-v2")), rules) == "dataset:evals-v2"
    assert infer_failure(failure_text(lambda: load_dataset("evals-v2")), RULES) is None


def test_excerpt_keeps_exception_lines_and_arguments_and_drops_source_listings() -> None:
    text = "repo_id = 'org/m'\n\n    def f():\n        x = 1\n>       raise E\n"
    text += "E   ValueError: boom\n\nf.py:3: ValueError"

    assert excerpt(text) == "repo_id = 'org/m'\n>       raise E\nE   ValueError: boom\nf.py:3: ValueError"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('pattern = "("\nrequirement = "x"', "promote.requirements.rules[0].pattern: expected a regular expression"),
        ('pattern = "a"\nrequirement = "hub:{repo}"', "promote.requirements.rules[0].requirement: expected fields"),
        ('pattern = "a"', "promote.requirements.rules[0].requirement: expected a requirement"),
        ('pattern = "a"\nrequirement = "x"\nwhen = 1', "promote.requirements.rules[0].when: unknown key"),
    ],
)
def test_bad_rules_are_config_errors_naming_the_key(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "promote.toml"
    path.write_text(f'[promote]\ntrunk = "main"\n[[promote.requirements.rules]]\n{body}\n')

    with pytest.raises(ConfigError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        config.load(path)


def test_rules_and_model_dirs_load_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "promote.toml"
    path.write_text(
        '[promote]\ntrunk = "main"\n[promote.requirements]\nmodel_dirs = ["models"]\n'
        '[[promote.requirements.rules]]\npattern = "(?P<n>x)"\nrequirement = "dataset:{n}"\n'
    )

    loaded = config.load(path).requirements

    assert loaded == RequirementsConfig((tmp_path.resolve() / "models",), (RuleConfig("(?P<n>x)", "dataset:{n}"),))


# -- verdicts ------------------------------------------------------------------------


HERE = Station("dev", "linux-x86_64", ("cpu",), 16.0, ("hub:org/cached",), local=True, detected=True)
MODELS = Path("/srv/models")


def record(nodeid: str, outcome: str, text: str | None = None, **kw: object) -> TestRecord:
    return TestRecord(nodeid, outcome, 0.1, "main", 1, "MainThread", 1, excerpt=text, **kw)  # type: ignore[arg-type]


RECORDS = (
    record("test_a.py::test_ok", "passed"),
    record("test_a.py::test_wrong", "failed", "E   assert 1 == 2"),
    record("test_a.py::test_big_1", "error", f"E   FileNotFoundError: No such file: '{MODELS}/qwen3-27b/config.json'",
           fixture="conftest.py::big_model"),
    record("test_a.py::test_big_2", "error", f"E   FileNotFoundError: No such file: '{MODELS}/qwen3-27b/config.json'",
           fixture="conftest.py::big_model"),
    record("test_a.py::test_declared", "skipped", skip_reason="requires device:metal: not on station dev",
           requirements=("device:metal",)),
    record("test_a.py::test_cached", "failed", "E   OfflineModeIsEnabled: huggingface.co/org/cached/resolve/main/x"),
    record("test_a.py::test_import", "failed", "E   ModuleNotFoundError: No module named 'flash_attn_mlx'"),
)  # fmt: skip


def package(records: tuple[TestRecord, ...] = RECORDS) -> PackageResult:
    counts: dict[str, int] = {}
    for t in records:
        counts[t.outcome] = counts.get(t.outcome, 0) + 1
    return PackageResult("pkg", Path("/p"), "dev", 1, 1.0, records, (), (), Path("/out"), counts=counts)


def fleet(*others: Station) -> Inventory:
    return Inventory((HERE, *others))


RULES_WITH_MODELS = rules_of(RequirementsConfig(model_dirs=(MODELS,)))


def test_a_checkpoint_one_station_has_is_station_bound_and_counts_as_blocked() -> None:
    mac = Station("training", "darwin-arm64", ("metal", "cpu"), 128, ("checkpoint:qwen3-27b",))
    linux = Station("ci", "linux-x86_64", ("cpu",), 8)

    result = classify(package(), fleet(mac, linux), RULES_WITH_MODELS)

    assert [(b.test, b.check, b.requirements, b.stations, b.fixture) for b in result.blockers] == [
        ("test_a.py::test_big_1", "station-bound", ("checkpoint:qwen3-27b",), ("training",), "conftest.py::big_model"),
        ("test_a.py::test_big_2", "station-bound", ("checkpoint:qwen3-27b",), ("training",), "conftest.py::big_model"),
        ("test_a.py::test_declared", "station-bound", ("device:metal",), ("training",), None),
        ("test_a.py::test_import", "missing-package", ("package:flash_attn_mlx",), (), None),
    ]
    assert result.blocked_tests == tuple(b.test for b in result.blockers)
    # The genuine failure stays failed; a hub model this station has cannot explain a failure either.
    assert (result.passed, result.failed, result.errors, result.skipped, result.blocked) == (1, 2, 0, 0, 4)
    assert result.blocked_by == {"checkpoint:qwen3-27b": 2, "device:metal": 1, "package:flash_attn_mlx": 1}
    assert [(f.check, f.severity, f.subject, f.cause) for f in result.findings] == [
        ("station-bound", "warning", "conftest.py::big_model", "conftest.py::big_model"),
        ("station-bound", "warning", "test_a.py::test_declared", None),
        ("missing-package", "error", "test_a.py::test_import", None),
    ]
    assert result.findings[0].message == (
        "needs checkpoint:qwen3-27b, which only training has; it did not run here on dev; "
        "2 test(s) via conftest.py::big_model (2): test_a.py::test_big_1, test_a.py::test_big_2"
    )
    assert blocked_summary(result) == [
        "2 blocked: checkpoint:qwen3-27b only on training",
        "1 blocked: device:metal only on training",
        "1 blocked: package:flash_attn_mlx not installed here",
    ]
    # Run on a station (a fleet of one): the package is missing there, not here.
    assert (
        blocked_summary(replace(result, fleet=("mini",)))[-1]
        == "1 blocked: package:flash_attn_mlx not installed on mini"
    )
    assert result.to_json()["blocked_by"] == result.blocked_by


def test_a_checkpoint_no_station_has_is_an_impossible_requirement() -> None:
    linux = Station("ci", "linux-x86_64", ("cpu",), 8)

    result = classify(package(), fleet(linux), RULES_WITH_MODELS)

    impossible = [f for f in result.findings if f.check == "impossible-requirement"]
    assert [(f.severity, f.subject) for f in impossible] == [
        ("error", "conftest.py::big_model"),
        ("error", "test_a.py::test_declared"),
    ]
    assert "needs checkpoint:qwen3-27b, which no station has: it can never run" in impossible[0].message
    # Metal some machine has, only not this fleet: "never" would not be true of it.
    assert impossible[1].message == "needs device:metal, which no station here has: it cannot run on this fleet"
    assert blocked_summary(result)[0] == "2 blocked: checkpoint:qwen3-27b not on any station"
    assert not result.green
    assert outcome([result]).status == "fail"
    assert outcome([result]).reason.endswith("; 3 finding(s) of tests no station here can run as configured")


def test_running_out_of_memory_is_bound_to_stations_with_more_memory() -> None:
    oom = (record("test_m.py::test_70b", "failed", "E   MemoryError"),)
    big = Station("training", "darwin-arm64", ("metal",), 128)
    small = Station("ci", "linux-x86_64", ("cpu",), 8)

    bound = classify(package(oom), fleet(big, small), RULES).blockers
    impossible = classify(package(oom), fleet(small), RULES).blockers

    assert [(b.check, b.stations) for b in bound] == [("station-bound", ("training",))]
    assert [(b.check, b.requirements) for b in impossible] == [("impossible-requirement", ("memory",))]


def test_nothing_blocked_leaves_the_result_alone_and_the_check_passes() -> None:
    genuine = package((record("test_a.py::test_wrong", "failed", "E   assert 1 == 2"),))

    result = classify(genuine, fleet(), RULES)

    assert result is genuine
    assert (outcome([result]).status, outcome([]).status) == ("pass", "undecided")


def test_one_finding_per_requirement_names_its_holders_and_its_main_one_is_the_subject() -> None:
    need = "E   LocalEntryNotFoundError: huggingface.co/org/model/resolve/main/config.json offline"
    setup = "tests/test_gen.py::TestGen::setUpClass"
    records = (
        record("tests/test_utils.py::TestUtils::test_load", "failed", need),
        *(record(f"tests/test_gen.py::TestGen::test_{i}", "error", need, fixture=setup) for i in range(3)),
        record("tests/test_other.py::test_plain", "failed", need),
        record(
            "tests/test_tok.py::TestTok::test_one",
            "failed",
            "E   LocalEntryNotFoundError: huggingface.co/org/other/resolve/x",
        ),
    )

    result = classify(package(records), fleet(), RULES)

    found = [(f.check, f.subject, f.cause) for f in result.findings]
    assert found == [
        ("impossible-requirement", setup, setup),
        ("impossible-requirement", "tests/test_tok.py::TestTok::test_one", None),
    ]
    assert result.findings[0].message == (
        "needs hub:org/model, which no station here has: it cannot run on this fleet; 5 test(s) via "
        "tests/test_gen.py::TestGen::setUpClass (3), tests/test_utils.py::TestUtils (1), tests/test_other.py (1): "
        "tests/test_utils.py::TestUtils::test_load, "
        "tests/test_gen.py::TestGen::test_0, tests/test_gen.py::TestGen::test_1 (+2 more)"
    )
    # The per-test records (the JSON's blockers) stay one per test.
    assert len(result.blockers) == 6 and result.blocked_by == {"hub:org/model": 5, "hub:org/other": 1}


def test_a_module_that_cannot_import_a_package_is_one_missing_package_finding_not_also_a_package_error() -> None:
    missing = "E   ModuleNotFoundError: No module named 'lm_eval'"
    records = (
        record("tests/test_eval.py", "error", missing),
        record("tests/test_more.py", "error", missing),
        record("tests/test_x.py::test_uses", "failed", missing),
        record("tests/test_ok.py::test_ok", "passed"),
    )
    modules = ("tests/test_eval.py", "tests/test_more.py")
    collect = [Finding("package-error", "error", m, f"pytest could not collect {m}: {missing}") for m in modules]
    broken = Finding(
        "package-error", "error", "tests/test_b.py", "pytest could not collect tests/test_b.py: SystemExit"
    )
    pkg = replace(package(records), findings=(*collect, broken))

    result = classify(pkg, fleet(), RULES)

    assert [(f.check, f.subject) for f in result.findings] == [
        ("package-error", "tests/test_b.py"),
        ("missing-package", "tests/test_eval.py"),
    ]
    assert result.findings[1].message == (
        "cannot import lm_eval: not installed on station dev; no pyproject.toml declares the package's dependencies; "
        "3 tests or modules fail instead of skipping; 1 test(s) via tests/test_x.py (1): tests/test_x.py::test_uses; "
        "2 module(s) not collected: tests/test_eval.py, tests/test_more.py"
    )


def test_a_tokenizer_loaded_through_a_variable_names_the_repo_from_the_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = "org/" + "tiny-tokenizer"  # no literal in the calling line: the frames' arguments must say it
    try:
        transformers.AutoTokenizer.from_pretrained(repo, local_files_only=True)
    except OSError:
        # As pytest reports a failure: the long traceback with each frame's arguments.
        text = str(pytest.ExceptionInfo.from_current().getrepr(style="long", funcargs=True))
    else:
        raise AssertionError("loaded a tokenizer that is in no cache")

    assert "tiny-tokenizer" not in text.splitlines()[-1]
    assert infer_failure(text, RULES) == "hub:org/tiny-tokenizer"
