"""Audit checks, one module or package per check family; each returns a CheckOutcome."""
