"""The station inventory: what a station has, the local one detected, merged with the config, `promote stations`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promote import config
from promote.config import StationConfig
from promote.core.station import Station, declared, read_station
from promote.runners.stations import (
    cached_hub_models,
    detect_local,
    hub_cache_dir,
    inventory,
    local_platform,
    merge,
)
from tests.helpers.cli import run

TRAINING = StationConfig(
    Station(
        "training",
        platform="darwin-arm64",
        devices=("metal", "cpu"),
        memory_gb=128,
        resources=("checkpoint:qwen3-27b-4bit",),
        ssh="bert@training.local",
    )
)


def fake_hub_cache(root: Path, kind: str, repo_id: str) -> None:
    """A cache entry laid out the way huggingface_hub writes one (refs -> snapshot with a file)."""
    entry = root / f"{kind}s--{repo_id.replace('/', '--')}"
    (entry / "snapshots" / "0123abcd").mkdir(parents=True)
    (entry / "snapshots" / "0123abcd" / "config.json").write_text("{}")
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text("0123abcd")


def test_a_station_has_devices_memory_platform_and_named_resources() -> None:
    mac = Station("training", "darwin-arm64", ("metal", "cpu"), 128, ("checkpoint:qwen3-27b-4bit",))

    assert [mac.has(r) for r in ("device:metal", "device:gpu", "device:cuda")] == [True, True, False]
    assert [mac.has(r) for r in ("memory:64", "memory:128", "memory:256")] == [True, True, False]
    assert [mac.has(r) for r in ("platform:darwin-arm64", "platform:linux-x86_64")] == [True, False]
    assert mac.lacking(["checkpoint:qwen3-27b-4bit", "hub:org/x", "device:metal"]) == ("hub:org/x",)
    assert not Station("unknown").has("memory:1")
    assert not mac.has("memory") and not mac.has("memory:lots")


def test_requires_marker_arguments_become_requirement_strings() -> None:
    assert declared(("checkpoint:qwen3-27b-4bit",), {"device": "metal", "memory_gb": 64}) == (
        "checkpoint:qwen3-27b-4bit",
        "device:metal",
        "memory:64",
    )
    assert declared((), {"memory_gb": 0.5, "platform": "darwin-arm64"}) == ("platform:darwin-arm64", "memory:0.5")
    with pytest.raises(TypeError, match="unknown keyword 'gpu'"):
        declared((), {"gpu": True})
    with pytest.raises(TypeError, match="memory_gb is a number"):
        declared((), {"memory_gb": "lots"})


def test_station_json_round_trips(tmp_path: Path) -> None:
    mac = Station("training", "darwin-arm64", ("metal",), 128.0, ("hub:org/m",), ssh="bert@training", local=True)
    path = tmp_path / "station.json"
    path.write_text(json.dumps(mac.to_json()))

    assert read_station(path) == mac


def test_hub_models_are_read_from_the_cache_and_a_missing_cache_is_empty(tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    fake_hub_cache(cache, "model", "mlx-community/Qwen1.5-0.5B-Chat-4bit")
    fake_hub_cache(cache, "dataset", "org/evals")

    assert cached_hub_models(cache) == (("hub:datasets/org/evals", "hub:mlx-community/Qwen1.5-0.5B-Chat-4bit"), None)
    assert cached_hub_models(tmp_path / "nowhere") == ((), None)


def awkward_hub_cache(root: Path) -> None:
    """A cache with what real ones accumulate: blobs behind symlinks, half downloads, stray files."""
    fake_hub_cache(root, "model", "mlx-community/Complete-4bit")
    fake_hub_cache(root, "space", "org/demo")
    fake_hub_cache(root, "kernel", "org/flash")
    linked = root / "models--org--linked"
    (linked / "blobs").mkdir(parents=True)
    (linked / "blobs" / "aa11").write_text("weights")
    (linked / "snapshots" / "rev1" / "sub").mkdir(parents=True)
    (linked / "snapshots" / "rev1" / "sub" / "model.safetensors").symlink_to(linked / "blobs" / "aa11")
    partial = root / "models--org--partial"  # a download cut short: a blob, no snapshot file yet
    (partial / "blobs").mkdir(parents=True)
    (partial / "blobs" / "bb22.incomplete").write_text("half")
    (partial / "snapshots" / "rev1").mkdir(parents=True)
    broken = root / "models--org--broken"  # a snapshot pointing at a deleted blob
    (broken / "snapshots" / "rev1").mkdir(parents=True)
    (broken / "snapshots" / "rev1" / "config.json").symlink_to(broken / "blobs" / "gone")
    (broken / "snapshots" / "rev2").mkdir()
    (broken / "snapshots" / "rev2" / "ok.json").write_text("{}")
    (root / "models--org--no-snapshots" / "blobs").mkdir(parents=True)
    stray = root / "models--org--stray-file"
    (stray / "snapshots").mkdir(parents=True)
    (stray / "snapshots" / "not-a-revision").write_text("")
    (root / "models--org--stray-file" / "snapshots" / ".DS_Store").write_text("")
    refs_file = root / "models--org--refs-file"
    fake_hub_cache(root, "model", "org/refs-file-ok")
    (refs_file / "snapshots" / "rev1").mkdir(parents=True)
    (refs_file / "snapshots" / "rev1" / "a.json").write_text("{}")
    (refs_file / "refs").write_text("not a folder")
    (root / ".locks" / "models--org--linked").mkdir(parents=True)
    (root / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55")
    (root / "notes.txt").write_text("")
    (root / "gguf--org--unknown-kind" / "snapshots" / "rev1").mkdir(parents=True)
    (root / "gguf--org--unknown-kind" / "snapshots" / "rev1" / "a").write_text("")


def test_hub_cache_reading_agrees_with_huggingface_hubs_own_scanner(tmp_path: Path) -> None:
    hub = pytest.importorskip("huggingface_hub")
    cache = tmp_path / "hub"
    awkward_hub_cache(cache)

    info = hub.scan_cache_dir(cache)
    theirs = sorted(
        f"hub:{'' if r.repo_type == 'model' else r.repo_type + 's/'}{r.repo_id}"
        for r in info.repos
        if r.nb_files and r.revisions
    )
    ours, note = cached_hub_models(cache)

    assert note is None
    # huggingface_hub's scanner before 2.0 rejects kernel repos (with a warning naming the repo type).
    knows_kernels = not any("found `kernel`" in str(w) for w in info.warnings)
    assert [m for m in ours if knows_kernels or not m.startswith("hub:kernels/")] == theirs
    assert ours == (
        "hub:kernels/org/flash",
        "hub:mlx-community/Complete-4bit",
        "hub:org/linked",
        "hub:org/refs-file-ok",
        "hub:spaces/org/demo",
    )


def test_hub_cache_location_follows_huggingface_hub_precedence(tmp_path: Path) -> None:
    assert hub_cache_dir({"HF_HUB_CACHE": "/c", "HF_HOME": "/h"}) == Path("/c")
    assert hub_cache_dir({"HF_HOME": "/h", "XDG_CACHE_HOME": "/x"}) == Path("/h/hub")
    assert hub_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert hub_cache_dir({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "huggingface" / "hub"


def test_a_hub_cache_location_that_cannot_be_expanded_is_a_note_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "models" / "qwen3-0.6b").mkdir(parents=True)

    station, notes = detect_local([tmp_path / "models"], {"HF_HOME": "~promote-no-such-user/hf"})

    assert station.resources == ("checkpoint:qwen3-0.6b",)
    [note] = [n for n in notes if "Hugging Face" in n]
    assert note.startswith("cannot find the Hugging Face cache: HF_HOME='~promote-no-such-user/hf': ")
    assert note.endswith("; cached hub models not detected")


def test_local_station_is_detected_with_mlx_devices_memory_hub_models_and_checkpoints(tmp_path: Path) -> None:
    mx = pytest.importorskip("mlx.core")
    fake_hub_cache(tmp_path / "hf" / "hub", "model", "org/tiny")
    (tmp_path / "models" / "qwen3-0.6b").mkdir(parents=True)

    station, notes = detect_local([tmp_path / "models"], {"HF_HOME": str(tmp_path / "hf")})

    assert (station.name, station.platform, station.local, station.detected) == ("local", local_platform(), True, True)
    assert station.devices[0] == "cpu"
    assert ("metal" in station.devices) == mx.metal.is_available()
    assert station.memory_gb is not None and station.memory_gb > 0
    assert station.resources == ("checkpoint:qwen3-0.6b", "hub:org/tiny")
    assert notes == []


def test_the_configured_station_on_this_platform_without_ssh_is_the_local_one() -> None:
    here = Station("local", local_platform(), ("cpu",), 16.0, ("hub:org/tiny",), local=True, detected=True)
    mine = StationConfig(Station("dev", platform=local_platform(), devices=("metal",), resources=("dataset:evals",)))

    merged = merge(here, [TRAINING, mine])

    assert [s.name for s in merged] == ["training", "dev"]
    dev = merged[1]
    # Observed devices win over configured ones; configured resources are kept.
    assert (dev.local, dev.devices, dev.memory_gb) == (True, ("cpu",), 16.0)
    assert dev.resources == ("dataset:evals", "hub:org/tiny")
    assert [s.name for s in merge(here, [TRAINING])] == ["local", "training"]


def test_promote_stations_prints_the_inventory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    (tmp_path / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\n\n[promote.stations.training]\nplatform = "darwin-arm64"\n'
        'devices = ["metal", "cpu"]\nmemory_gb = 128\nresources = ["checkpoint:qwen3-27b-4bit"]\n'
        'ssh = "bert@training.local"\n\n[promote.requirements]\nmodel_dirs = ["models"]\n'
    )
    (tmp_path / "models" / "tiny-4bit").mkdir(parents=True)

    result = run(tmp_path, "stations", "--json")
    data = json.loads(result.stdout)
    human = run(tmp_path, "stations").stdout

    assert result.exit_code == 0
    assert data["local"] == "local"
    assert [(s["name"], s["local"], s["ssh"]) for s in data["stations"]] == [
        ("local", True, None),
        ("training", False, "bert@training.local"),
    ]
    assert data["stations"][0]["resources"] == ["checkpoint:tiny-4bit"]
    assert data["stations"][1]["resources"] == ["checkpoint:qwen3-27b-4bit"]
    lines = human.splitlines()
    assert lines[0].split() == ["STATION", "PLATFORM", "DEVICES", "MEMORY", "WHERE", "RESOURCES"]
    assert lines[1].startswith("local") and "here (detected)" in lines[1] and lines[1].endswith("checkpoint:tiny-4bit")
    assert lines[2].split() == ["training", "darwin-arm64", "metal,cpu", "128", "GB", "bert@training.local",
                                "checkpoint:qwen3-27b-4bit"]  # fmt: skip


def test_inventory_reads_model_dirs_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "promote.toml"
    path.write_text('[promote]\ntrunk = "main"\n[promote.requirements]\nmodel_dirs = ["ckpt"]\n')
    (tmp_path / "ckpt" / "llama-3b").mkdir(parents=True)

    inv = inventory(config.load(path), {"HF_HOME": str(tmp_path / "no-hf")})

    assert inv.local.resources == ("checkpoint:llama-3b",)
    assert inv.to_json()["local"] == "local"
