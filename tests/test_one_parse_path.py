"""Every parse of Python source goes through schemas/python_ast.py, one at a time (CPython 3.11's
AST constructor is not safe on two threads: gh-106905, which failed CI once). The rule is
scripts/check_layers.py's, checked on the real tree and on a tree written here."""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from test_language_homes import _checker
from trajforge.schemas import python_ast

ROOT = Path(__file__).resolve().parents[1]


def test_the_real_tree_parses_only_through_python_ast():
    assert _checker().parse_errors(ROOT) == []


def test_a_parse_elsewhere_is_an_error_but_not_inside_the_sandbox(tmp_path: Path):
    for room in ("pipelines", "generators", "verifiers", "filters", "schemas"):
        (tmp_path / room).mkdir()
    (tmp_path / "generators" / "reader.py").write_text(
        "import ast\n\n\ndef read(text):\n    return ast.parse(text), ast.literal_eval('1')\n"
    )
    sandbox = tmp_path / "verifiers" / "grader" / "in_container"
    sandbox.mkdir(parents=True)
    (sandbox / "plugin.py").write_text("import ast\n\nTREE = ast.parse('x = 1')\n")
    (tmp_path / "schemas" / "python_ast.py").write_text("import ast\n\nast.parse('')\n")
    errors = _checker().parse_errors(tmp_path)
    assert [e.split(" calls ")[0] for e in errors] == ["generators/reader.py:5"] * 2
    assert "schemas/python_ast.py" in errors[0] and "gh-106905" in errors[0]


def test_parses_on_many_threads_give_what_one_thread_gives():
    sources = [f"def f{i}(x):\n    return [x * {i} for _ in range({i})]\n" * 40 for i in range(64)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        dumped = list(pool.map(lambda s: ast.dump(python_ast.parse(s)), sources))
    assert dumped == [ast.dump(python_ast.parse(s)) for s in sources]
    assert python_ast.literal_eval("{'a': (1, 2)}") == {"a": (1, 2)}
