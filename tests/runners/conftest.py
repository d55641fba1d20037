"""Fixtures shared by the plugin tests."""

from __future__ import annotations

import contextlib

# The plugin imports mlx.core when it records. Import it once here, in the outer process:
# pytester's in-process runs drop modules first imported inside them, and importing the
# nanobind extension a second time into one process aborts it.
with contextlib.suppress(ImportError):
    import mlx.core  # noqa: F401
