"""The mocha command line a graded run uses: the project's test-choosing options only."""

from __future__ import annotations

import json

from trajforge.verifiers.grader.mocha_args import mocha_args, project_args


def test_the_grader_keeps_only_the_projects_test_choosing_options():
    test = (
        "lint && NODE_ENV=test mocha -r ./a.js --reporter dot --config x.json --bail "
        "--timeout 5 -n inspect --ui=tdd test/ $EXTRA"
    )
    script = {"scripts": {"test": test}}
    package = json.dumps(script).encode()
    assert project_args(package) == (["-r", "./a.js", "--ui=tdd"], ["test/"])
    assert project_args(b"{not json") == ([], [])
    assert project_args(json.dumps({"scripts": {"test": "mocha 'x"}}).encode()) == ([], [])
    args = mocha_args("R.js", "node_modules/.bin/_mocha", ("t/a.js",), package, 60)
    assert args == ["-r", "R.js", "node_modules/.bin/_mocha", "-r", "./a.js", "--ui=tdd",
                    "--reporter", "R.js", "--timeout", "60000", "t/a.js"]  # fmt: skip
    assert mocha_args("R.js", "m", (), package, 1)[-1] == "test/"
