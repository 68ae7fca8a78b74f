"""Everything that judges: dedup, decontamination, scores, trajectory filters, quality gates."""
