"""Running a package on another station over ssh: sync, run, watch, and the faults on the way."""
