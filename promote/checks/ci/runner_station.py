"""What a CI runner has, read from its `runs-on` labels: a place a test can run, like a station.

GitHub documents its hosted images: `macos-14` and later are Apple silicon (Metal), `macos-13` and the `-large`
sizes are Intel; every hosted runner reaches the network, so it can download any hub model. A self-hosted runner
is what its labels say and no more: `[self-hosted, macos]` is a Mac (Apple silicon unless labelled `x64`), with
no network promised.
"""

from __future__ import annotations

import fnmatch
import re

from promote.core.station import Station

# Intel images: macOS 13 and older, and the `-large` sizes (`-xlarge` is Apple silicon).
_INTEL_MACOS = re.compile(r"^macos-(?:1[0-3](?:\.\d+)?(?:-large)?|[\w.]+-large)$")
_HOSTED = ("ubuntu-*", "macos-*", "windows-*")


def runner_station(name: str, labels: tuple[str, ...]) -> Station | None:
    """The runner a job with these labels gets, as a station named `name`; None when the labels say nothing."""
    lowered = tuple(label.casefold() for label in labels)
    self_hosted = "self-hosted" in lowered
    hosted = [x for x in lowered if any(fnmatch.fnmatchcase(x, p) for p in _HOSTED)]
    if not self_hosted and len(hosted) == 1:
        return _hosted(name, hosted[0])
    if self_hosted:
        return _self_hosted(name, lowered)
    return None


def _hosted(name: str, label: str) -> Station:
    if label.startswith("macos-"):
        intel = bool(_INTEL_MACOS.match(label))
        platform, devices = ("darwin-x86_64", ("cpu",)) if intel else ("darwin-arm64", ("cpu", "gpu", "metal"))
        return Station(name, platform, devices, network=True)
    arm = label.endswith("-arm")
    system = "linux" if label.startswith("ubuntu-") else "win32"
    return Station(name, f"{system}-{'arm64' if arm else 'x86_64'}", ("cpu",), network=True)


def _self_hosted(name: str, labels: tuple[str, ...]) -> Station | None:
    arch = "x86_64" if "x64" in labels else "arm64"
    if "macos" in labels:
        apple = arch == "arm64"
        return Station(name, f"darwin-{arch}", ("cpu", "gpu", "metal") if apple else ("cpu",))
    if "linux" in labels:
        return Station(name, f"linux-{arch}", ("cpu",))
    return None
