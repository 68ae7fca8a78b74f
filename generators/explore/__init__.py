"""Exploration tasks: doc examples, explorers, backward labeling, recordings."""
