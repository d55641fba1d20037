"""The subcommands, one module per command family; importing them registers them on the group."""
