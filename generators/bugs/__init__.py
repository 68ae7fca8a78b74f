"""Synthetic tasks: procedural bug injection and combined bugs."""
