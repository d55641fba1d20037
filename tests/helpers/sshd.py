"""A real sshd on 127.0.0.1 with keys generated in a temp dir, for the remote-station tests."""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])


class SshdUnavailable(Exception):
    """sshd is not installed here or would not start; the message says why."""


@dataclass
class Sshd:
    """A running sshd: where it listens, the client key it accepts and the host key it shows."""

    root: Path
    port: int
    user: str
    client_key: Path
    known_hosts: Path
    proc: subprocess.Popen[bytes]

    @property
    def destination(self) -> str:
        return f"{self.user}@127.0.0.1"

    @property
    def ssh_options(self) -> list[str]:
        # No user or system ssh config, and the one host key this sshd has: a hermetic, verified connection.
        return ["-F", "/dev/null", "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes"]

    def station_toml(self, name: str, **extra: object) -> str:
        """A `[promote.stations.NAME]` table that reaches this sshd."""
        keys: dict[str, object] = {
            "ssh": self.destination,
            "port": self.port,
            "identity": str(self.client_key),
            "ssh_options": self.ssh_options,
            **extra,
        }
        lines = [f"[promote.stations.{name}]"]
        for key, value in keys.items():
            if isinstance(value, list):
                lines.append(f"{key} = [" + ", ".join(f'"{v}"' for v in value) + "]")
            elif isinstance(value, str):
                lines.append(f'{key} = "{value}"')
            else:
                lines.append(f"{key} = {value}")
        return "\n".join(lines) + "\n"

    def sessions(self) -> list[int]:
        """Pids of the per-connection sshd processes (the listener's children)."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rpartition(")")[2].split()
                except OSError:
                    continue
                if int(fields[1]) == self.proc.pid:
                    found.append(int(entry.name))
        return found

    def drop_sessions(self) -> int:
        """Kill every open connection, as a network fault or a rebooting station would; the listener stays."""
        pids = self.sessions()
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def log(self) -> str:
        return (self.root / "sshd.log").read_text(errors="replace")


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(root: Path, *, timeout_s: float = 10.0) -> Sshd:
    """Start sshd in `root` on a free loopback port; raises SshdUnavailable when it cannot run here."""
    sshd = shutil.which("sshd", path=SEARCH)
    if sshd is None or shutil.which("ssh-keygen") is None or shutil.which("ssh") is None:
        raise SshdUnavailable("openssh-server (sshd) or openssh-client is not installed")
    root.mkdir(parents=True, exist_ok=True)
    for name in ("host_key", "client_key", "stranger_key"):
        _keygen(root / name)
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    user = getpass.getuser()
    if os.geteuid() == 0:
        # Privilege separation needs this directory; a fresh container may not have it.
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
    port = free_port()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\nPidFile {root / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\n"
        # The keys live under /tmp, which is world-writable: strict modes would refuse them.
        "StrictModes no\nPubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nPermitRootLogin prohibit-password\nLogLevel VERBOSE\nMaxStartups 100\nMaxSessions 100\n"
    )
    host_pub = (root / "host_key.pub").read_text().split()
    known_hosts = root / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    log = (root / "sshd.log").open("wb")
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)
    server = Sshd(root, port, user, root / "client_key", known_hosts, proc)
    deadline = time.monotonic() + timeout_s
    while "Server listening" not in server.log():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(server)
            raise SshdUnavailable(f"sshd did not start: {server.log().strip()[-500:] or 'no output'}")
        time.sleep(0.05)
    return server


def stop(server: Sshd) -> None:
    # Sessions first: the listener's children are found by parent pid, which its exit would change.
    server.drop_sessions()
    if server.proc.poll() is None:
        server.proc.terminate()
        try:
            server.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()


@contextmanager
def running(root: Path) -> Iterator[Sshd]:
    """An sshd for the duration of the block."""
    server = start(root)
    try:
        yield server
    finally:
        stop(server)
