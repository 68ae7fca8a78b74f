"""Starts pytest for the grader, in the tests' own (unprivileged) process.

Run as ``python -I -B launch.py REPO ARGS``: no working directory, PYTHONPATH or user site on
``sys.path``, so pytest, its plugins and the standard library load from the image before anything
in the repository can. The repository comes last (the project's editable install usually puts it
there already); the grader's plugins come first, from a folder only root can write.
"""

import os
import sys

PLUGINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins")
REPO = sys.argv[1]

sys.path.insert(0, PLUGINS)
if REPO not in sys.path:
    sys.path.append(REPO)

import pytest  # noqa: E402

sys.exit(int(pytest.main(sys.argv[2:])))
