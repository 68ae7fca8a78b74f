"""Everything that judges: dedup, decontamination, scores, trajectory filters (see DESIGN.md)."""
