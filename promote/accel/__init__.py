"""`promote accel`: an accelerated path earns its promotion: kill switch, numeric parity, interleaved A/B."""
