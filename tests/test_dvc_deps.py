"""dvc.yaml names what each stage's code depends on, so a change there reruns the stage.

deps: every project folder the stage's command module imports, transitively (lazy imports in
functions too), as ``scripts/check_layers.py`` sees them. params: every params section the code
that the command's ``run()`` reaches reads as ``params.<section>`` (``self.params.<section>``). The
reach is found by name: from ``run()``, every function of the imported modules whose name is used,
and every class whose name is used, whole (its bases too: Beam calls their methods).
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from trajforge.schemas.params import Params

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from check_layers import LAYERS, PREFIX, folder, graph  # noqa: E402

SECTIONS = {f.name for f in dataclasses.fields(Params)}
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


@cache
def _graph() -> dict[str, set[str]]:
    return graph(ROOT)


def _imported(module: str) -> set[str]:
    """``module`` and every trajforge module it imports, transitively."""
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_graph().get(name, ()))
    return seen


@cache
def _tree(module: str) -> ast.Module:
    path = ROOT.joinpath(*module.removeprefix(PREFIX).split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return ast.parse(path.read_text(), filename=str(path))


def _names(node: ast.AST) -> set[str]:
    """Every name ``node`` uses: plain names and attribute names."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def _section_reads(node: ast.AST) -> set[str]:
    """Sections read as ``params.<section>`` or ``<x>.params.<section>``; a value set by a flag
    (``params.pipeline.runner = args.runner``) is not a read."""
    written = {
        id(sub)
        for stmt in ast.walk(node)
        if isinstance(stmt, ast.Assign | ast.AnnAssign)
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        for sub in ast.walk(target)
    }
    found = set()
    for sub in ast.walk(node):
        read = DERIVED.get(sub.attr, {sub.attr}) if isinstance(sub, ast.Attribute) else set()
        if read and read <= SECTIONS and id(sub) not in written:
            owner = sub.value
            if (isinstance(owner, ast.Name) and owner.id == "params") or (
                isinstance(owner, ast.Attribute) and owner.attr == "params"
            ):
                found |= read
    return found


# Params properties and the top-level keys they read (``Params.results_cache``). shared_cache is
# left out: it says where results are kept, not what they are, and a key dvc.yaml names must be in
# every params file (DVC refuses the stage otherwise), so older params files would stop working.
DERIVED = {"results_cache": {"cache_dir"}}


def _stage_module(stage: str) -> str:
    return f"{PREFIX}pipelines.commands.{stage}"


def _sections_read(stage: str) -> set[str]:
    modules = sorted(_imported(_stage_module(stage)))
    defs: list[tuple[str, ast.AST]] = [
        (node.name, node)
        for module in modules
        for node in _tree(module).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    # A registry's value (``LANGUAGES = (Python(), ...)``) reaches a class's methods one by one:
    # a stage calls them through the interface (``language.prepare(...)``), so a method counts
    # when its name is used, not every method of every language.
    values = {
        target.id: node.value
        for module in modules
        for node in _tree(module).body
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    methods = [
        (node.name, method.name, method)
        for module in modules
        for node in _tree(module).body
        if isinstance(node, ast.ClassDef)
        for method in node.body
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    run = next(
        node for name, node in defs if name == "run" and node in _tree(_stage_module(stage)).body
    )
    used, reached, reads = _names(run), {id(run)}, _section_reads(run)
    registered: set[str] = set()  # names a reached registry value holds
    grew = True
    while grew:
        grew = False
        for name, value in values.items():
            if name in used and not _names(value) <= registered:
                registered |= _names(value)
                used |= {n for n in _names(value) if n in values}
                grew = True
        reachable = [(name, node) for name, node in defs if name in used] + [
            (method, node)
            for owner, method, node in methods
            if owner in registered and method in used
        ]
        for _name, node in reachable:
            if id(node) not in reached:
                reached.add(id(node))
                used |= _names(node)
                reads |= _section_reads(node)
                grew = True
    return reads


def _command_stages() -> list[str]:
    return [name for name, stage in STAGES.items() if stage["cmd"].startswith(f"trajforge {name} ")]


def test_every_stage_runs_its_own_command():
    assert _command_stages() == list(STAGES)
    for name in STAGES:
        assert (ROOT / "pipelines" / "commands" / f"{name}.py").exists(), name


@pytest.mark.parametrize("stage", _command_stages())
def test_deps_name_every_folder_the_stage_imports(stage):
    folders = {folder(m) for m in _imported(_stage_module(stage))}
    listed = {dep for dep in STAGES[stage]["deps"] if dep in LAYERS}
    assert listed == folders


@pytest.mark.parametrize("stage", _command_stages())
def test_params_name_every_section_the_stage_reads(stage):
    listed = set(STAGES[stage].get("params", []))
    assert listed <= SECTIONS
    assert listed == _sections_read(stage)


def test_a_lazy_import_in_run_counts():
    """The mine command imports its stage (and so generators) only inside ``run()``."""
    assert f"{PREFIX}pipelines.stages.mine" in _imported(_stage_module("mine"))
    assert "schemas" in {folder(m) for m in _imported(_stage_module("mine"))}
