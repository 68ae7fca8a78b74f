"""Readers for agent trajectories people already have, one module per format.

Each reader takes a file's path and bytes and yields Trajectory records, or Rejections for the
records it cannot read, so one bad file or row never stops an import.
``generators.trajectories.importer`` holds the registry of readers and applies SWE-bench reports.
"""
