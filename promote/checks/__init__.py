"""Audit checks, one module per check family."""
