"""Python: its ``Language`` (language.py) and its libcst bug operators and mutant sampler."""
