"""`python -m promote` behaves like the `promote` console script."""

from __future__ import annotations

from promote.cli import main

if __name__ == "__main__":
    main()
