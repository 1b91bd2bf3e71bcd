"""The benchmark suites as data (BALROG, MOSAIC) and the shipped price table."""
