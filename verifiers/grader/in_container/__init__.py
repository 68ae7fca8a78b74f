"""Files shipped into a grading container (read as data; trajforge imports none of them, but for
the pure functions of ``harbor_grade.py``, which the Harbor export and its tests share)."""
