"""Python's files shipped into a grading container: the sealed launcher, the seal, the reporter,
and Harbor's grader (read as data; trajforge imports none of them, but for the pure functions of
``harbor_grade.py``, which the Harbor export and its tests share)."""
