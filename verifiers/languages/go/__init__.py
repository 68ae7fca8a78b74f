"""Go's proving floor: its test ids and reports, its graded run and patch policy."""
