"""promote: release promotion and audit automation for teams that run LLM inference on MLX."""

from __future__ import annotations

__version__ = "0.1.0"
