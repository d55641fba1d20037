"""Shared helpers for the test suite: real git repositories and bare mirrors in tmp_path."""
