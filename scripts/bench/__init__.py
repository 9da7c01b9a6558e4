"""The benchmarks: ``python -m scripts.bench NAME`` (see ``scripts/bench/__main__.py``)."""
