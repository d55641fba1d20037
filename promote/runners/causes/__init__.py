"""Finding the cause of a failure: rerun it alone, then bisect the tests that ran before it."""
