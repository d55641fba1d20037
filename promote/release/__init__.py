"""Check and merge: mirrors, drift from what is deployed, fast-forwards, and the journal of every push."""
