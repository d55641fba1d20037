"""Tests of the pytest plugin and what it records (promote/runners, except the runner)."""
