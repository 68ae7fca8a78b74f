"""Files shipped into a grading container (read as data, never imported by trajforge itself)."""
