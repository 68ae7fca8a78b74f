"""Programs the grader ships into a Go task's grading container (package data)."""
