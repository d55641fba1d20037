"""Loaded inside the tested interpreter (the pytest plugin): imports only promote.core and itself."""
