"""User-facing errors, and the one place that maps them to exit codes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_OK = 0
EXIT_BLOCKED = 1
EXIT_USAGE = 2
EXIT_UNDECIDED = 3
EXIT_PARTIAL = 4
EXIT_INTERRUPTED = 130


class PromoteError(Exception):
    """An error shown to the user as one line, without a traceback."""

    exit_code = EXIT_USAGE


class ConfigError(PromoteError):
    """The configuration is missing, unreadable or invalid."""


class UsageError(PromoteError):
    """The command was asked to do something that cannot be done as asked."""


class GitError(PromoteError):
    """A git operation failed in a way the user has to fix (not a mirror being down)."""


@contextmanager
def error_handler() -> Iterator[None]:
    """Turn PromoteError and Ctrl-C into one line on stderr and the documented exit code."""
    try:
        yield
    except PromoteError as e:
        from promote.core.redact import one_line

        # Flushed: an in-process caller (click 8.1's CliRunner) may swap sys.stderr out before exit flushes it.
        print(f"promote: error: {one_line(str(e))}", file=sys.stderr, flush=True)
        raise SystemExit(e.exit_code) from None
    except KeyboardInterrupt:
        print("promote: interrupted", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
