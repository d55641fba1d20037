"""Talk to a station with the system's `ssh`: argument lists locally, every remote word shell-quoted."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from promote.config import StationConfig
from promote.core.process import Finished, Telling, run_bounded
from promote.core.redact import redact

CONNECT_TIMEOUT_S = 15
# A station that stops answering (cable pulled, machine asleep) is noticed within about 30 s.
KEEPALIVE = ("-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3")
DEFAULT_PYTHON = "python3"


class StationError(Exception):
    """A station could not do what was asked; the message names the station and says why."""


# ssh's own complaints, and git's and a refused login's: the last of them is what finally went wrong.
TELLING = Telling(starts=("ssh:", "fatal:", "error:"), contains=("denied",))


@dataclass(frozen=True)
class Target:
    """How to reach one station: its name, `user@host`, and the ssh options that go with it."""

    station: str
    destination: str
    port: int | None = None
    identity: str | None = None
    options: tuple[str, ...] = ()
    python: str = DEFAULT_PYTHON

    @classmethod
    def from_config(cls, sc: StationConfig) -> Target:
        if sc.ssh is None:
            raise ValueError(f"station {sc.name} has no ssh destination")
        return cls(sc.name, sc.ssh, sc.port, sc.identity, sc.ssh_options, sc.python or DEFAULT_PYTHON)

    @property
    def label(self) -> str:
        """The station as reports name it, e.g. `training (ssh bert@training.local:2222)`."""
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.station} (ssh {self.destination}{port})"

    def ssh_command(self) -> list[str]:
        """`ssh` and its options, without destination: also what git runs as GIT_SSH_COMMAND."""
        # BatchMode: never wait for a password or a host-key answer nobody is there to give.
        cmd = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", *KEEPALIVE]
        if self.port is not None:
            cmd += ["-p", str(self.port)]
        if self.identity is not None:
            cmd += ["-i", str(Path(self.identity).expanduser()), "-o", "IdentitiesOnly=yes"]
        # After the station's own options, so that theirs win (ssh keeps the first value it is given).
        return cmd + list(self.options) + multiplexing()

    def argv(self, script: str) -> list[str]:
        """The local command that runs the POSIX shell `script` on the station."""
        # `sh -c` so the script means the same whatever the login shell of the station's user is.
        return [*self.ssh_command(), "--", self.destination, "sh -c " + shlex.quote(script)]

    def git_url(self, path: str) -> str:
        """An ssh:// URL of a repository at the absolute `path` on the station (port and key: GIT_SSH_COMMAND)."""
        return f"ssh://{self.host_spec}{path}"

    @property
    def host_spec(self) -> str:
        """`user@host` as URLs and rsync spell it: an IPv6 address in brackets."""
        user, at, host = self.destination.rpartition("@")
        return f"{user}{at}[{host}]" if ":" in host else self.destination

    def run(self, script: str, *, stdin: bytes | None = None, timeout: float | None = None) -> Finished:
        """Run `script` on the station and wait; never raises on failure; on timeout, kill ssh.

        The status is ssh's: 255 when ssh itself failed, None when the station did not answer in time.
        """
        argv = self.argv(script)
        try:
            done = run_bounded(argv, timeout=timeout, stdin=stdin, telling=TELLING)
        except FileNotFoundError:
            missing = "ssh: the ssh client is not installed here"
            return Finished(redact(" ".join(argv)), 255, "", missing, telling=TELLING)
        if done.status is None:
            return replace(done, stderr=f"ssh: no answer from the station in {timeout:g} s")
        return done

    def start(self, script: str, sink: IO[bytes]) -> subprocess.Popen[bytes]:
        """Start `script` on the station; its output and ssh's own messages go to `sink`."""
        # Not a session of its own: Ctrl-C ends ssh as it ends a local pytest, and the runner then cleans up there.
        return subprocess.Popen(self.argv(script), stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)


def multiplexing() -> list[str]:
    """ssh options that share one connection per station between promote's ssh calls (and a fleet's workers).

    A run opens several (the workdir, the push, the plugin, each worker): each after the first then skips the
    key exchange. The master ends a minute after the last of them. None when the sockets' directory cannot be
    made private to this user.
    """
    where = Path(tempfile.gettempdir()) / f"promote-ssh-{os.getuid()}"
    try:
        where.mkdir(mode=0o700, exist_ok=True)
        info = where.lstat()
    except OSError:
        return []
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return []  # not ours alone: another user could hijack the sockets in it
    # %C: a hash of the destination, port and user, short enough for a socket's path.
    return ["-o", "ControlMaster=auto", "-o", f"ControlPath={where}/%C", "-o", "ControlPersist=60"]


def connection_failure(target: Target, reply: Finished) -> str:
    """Why ssh could not get to the station at all, in words that say what to fix."""
    reason = reply.reason
    if "Permission denied" in reply.stderr:
        return f"authentication refused by {target.destination} ({reason}); is the key in its authorized_keys?"
    if "Host key verification failed" in reply.stderr:
        return f"host key of {target.destination} not known or changed ({reason})"
    return f"cannot connect to {target.destination} ({reason})"


def q(word: str | Path) -> str:
    """One word for the station's shell."""
    return shlex.quote(str(word))
