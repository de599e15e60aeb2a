"""Benchmark functions behind ``graphfeed bench`` (reused by the scripts in benchmarks/)."""
