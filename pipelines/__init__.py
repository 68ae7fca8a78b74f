"""Beam pipelines and the `trajforge` CLI: orchestration only."""
