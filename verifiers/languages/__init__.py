"""The proving floor of the language layer: one package per language (``python/``,
``javascript/``), each a ``Grading`` (``base.py``), listed once in ``registry.py``."""
