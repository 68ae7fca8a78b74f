"""JavaScript's files shipped into a grading container: the keyed reporters, one per runner, and
the guard (read as data)."""
