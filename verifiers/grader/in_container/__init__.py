"""The supervisor, shipped into every grading container (read as data; trajforge imports it only
in tests)."""
