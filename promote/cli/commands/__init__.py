"""The subcommands, one module per command family; the group in app.py imports each on first use."""
