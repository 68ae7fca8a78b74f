"""Python's proving floor: pytest's graded run and seal, the patch policy, doctests, sentinels'
planting, the reader of suspicious patches (``grading.py`` is the interface)."""
