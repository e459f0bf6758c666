"""trainhub benchmarks: ``python -m bench`` (or ``make bench``); see bench/README.md."""
