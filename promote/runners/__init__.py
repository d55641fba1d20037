"""Running test packages with isolation, and the pytest plugin that records what ran."""
