"""Installs the package `trajforge` (metadata lives in pyproject.toml).

- `trajforge` itself is `pipelines/api/`: its `__init__.py` is the public API (`from trajforge
  import Evaluator, reward, ...`, loaded lazily). It is shipped once, as `trajforge`, never also
  as `trajforge.pipelines.api`.
- The five top-level folders are `trajforge.<folder>`. Only the package list needs code: every
  subpackage under the folders, found at build time, so a new room is installed without touching
  a list.

Both the editable install (`pip install -e .`, what `make setup` runs) and a wheel read this map.
"""

from setuptools import find_packages, setup

FOLDERS = ("pipelines", "generators", "verifiers", "filters", "schemas")
API = "pipelines/api"

setup(
    packages=[
        "trajforge",
        *(
            f"trajforge.{name}"
            for name in find_packages(
                include=[f"{folder}*" for folder in FOLDERS], exclude=[API.replace("/", ".")]
            )
        ),
    ],
    package_dir={"trajforge": API, **{f"trajforge.{folder}": folder for folder in FOLDERS}},
    package_data={
        "trajforge": ["py.typed"],
        # the grader's JS reporters and guard, shipped into grading containers
        "trajforge.verifiers.languages.javascript.in_container": ["*.js", "*.mjs"],
    },
)
