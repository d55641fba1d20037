"""The bottom layer: errors, findings, git, processes, redaction, state on disk; knows no other layer."""
