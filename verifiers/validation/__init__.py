"""Proving candidates: the validation rule, per-candidate and coverage-guided mutant validation."""
