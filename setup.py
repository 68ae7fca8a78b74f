"""Installs the five top-level folders as `trajforge.<folder>` (metadata lives in pyproject.toml).

Only the package list needs code: every subpackage under the folders, found at build time, so a new
room is installed without touching a list.
"""

from setuptools import find_packages, setup

FOLDERS = ("pipelines", "generators", "verifiers", "filters", "schemas")

setup(
    packages=[
        f"trajforge.{name}" for name in find_packages(include=[f"{folder}*" for folder in FOLDERS])
    ],
    package_dir={f"trajforge.{folder}": folder for folder in FOLDERS},
)
