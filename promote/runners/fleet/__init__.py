"""A package over a fleet of stations: one pytest session here, pytest-xdist workers on each station."""
