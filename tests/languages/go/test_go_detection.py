"""Go's detection and toolchain choice (no Docker): which modules, which Go, and why."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.languages.at_commit import language_at
from trajforge.generators.languages.go import detection as project
from trajforge.generators.languages.go import runners, sources
from trajforge.generators.languages.go.profile import detect_at, go_reading
from trajforge.generators.languages.go.recipe import modules_in_recipe, recipe
from trajforge.generators.languages.go.toolchain import DEBIAN_GO, choose_toolchain
from trajforge.generators.languages.registry import for_repo, spelled
from trajforge.schemas.env_profile import EnvProfile
from trajforge.verifiers.languages.go.runs import PRE_MODULE_FILES


def write(root, files: dict[str, str]) -> str:
    for path, text in files.items():
        target = os.path.join(str(root), *path.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    return str(root)


def go_mod(module: str, go: str = "", toolchain: str = "") -> str:
    lines = [f"module {module}", ""]
    lines += [f"go {go}"] if go else []
    lines += [f"toolchain go{toolchain}"] if toolchain else []
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("go", "toolchain", "chosen"),
    [
        ("1.13", "", DEBIAN_GO),
        ("1.19", "", DEBIAN_GO),
        ("", "", DEBIAN_GO),
        ("1.20", "", "1.20.14"),
        ("1.21", "", "1.21.13"),  # a minor alone: its latest known patch
        ("1.21.0", "", "1.21.0"),  # a patch: as written
        ("1.22.3", "", "1.22.3"),
        ("1.21", "1.22.5", "1.22.5"),  # the toolchain line first
        ("1.99", "", "1.99.0"),  # a minor newer than the table: its .0
    ],
)
def test_the_go_line_and_the_toolchain_line_choose_the_go(go, toolchain, chosen) -> None:
    choice = choose_toolchain([("go.mod", go_mod("example.com/m", go, toolchain))])
    assert choice.version == chosen
    assert choice.fetched == (chosen != DEBIAN_GO)
    assert ("Debian's" in choice.why) == (chosen == DEBIAN_GO)
    assert (f"toolchain go{toolchain}" if toolchain else (f"go {go}" if go else "no go line")) in (
        choice.why
    )


def test_a_root_module_is_the_project_and_its_go_line_the_evidence(tmp_path) -> None:
    repo = write(tmp_path, {"go.mod": go_mod("example.com/calc", "1.22.3"), "go.sum": "",
                            "tools/go.mod": go_mod("example.com/calc/tools", "1.23")})  # fmt: skip
    found = project.detect(repo)
    assert found is not None
    assert (found.language, found.runner, found.package_manager) == ("go", "go", "go")
    assert found.runtime == "1.22.3"  # a nested module beside a root one is not tested
    assert found.evidence == ("go.mod: go 1.22.3",)
    assert found.lockfile == "go.sum"
    assert found.runner_args == ("example.com/calc=.",)
    assert found.why == (
        "go 1.22.3 (fetched toolchain): go.mod says go 1.22.3; module from go.mod; "
        "modules from the proxy"
    )


def test_no_go_mod_and_no_go_file_is_no_go_project(tmp_path) -> None:
    assert project.detect(write(tmp_path, {"README.md": "x\n", "vendor/a/a.go": "package a\n"}))\
        is None  # fmt: skip


@pytest.mark.parametrize(
    ("head", "minor"),
    [
        ("package lo\n", 19),
        ('//go:build go1.23\n\npackage it\n\nimport "iter"\n', 23),
        ("//go:build !go1.21\n\npackage c\n", 19),  # the fallback of older Gos asks nothing
        ('//go:build go1.21\n\npackage c\n\nimport "cmp"\n', 21),
        ("//go:build go1.26 && goexperiment.simd && amd64\n\npackage simd\n", 19),  # never
        ('//go:build windows\n\npackage w\n\nimport "slices"\n', 19),  # never built here
        ("//go:build (linux || darwin) && !go1.20\n\npackage u\n", 19),
        ("// Copyright\n\n//go:build go1.22 && cgo\n\npackage x\n", 22),
        ('package g\n\nimport (\n\t"fmt"\n\tr "math/rand/v2"\n)\n', 22),
        ('package g\n\nimport "slices"\n', 21),  # an untagged file on a newer std package
        ("//go:build go1.99\n\npackage future\n", 19),  # no known release satisfies it
    ],
)
def test_a_file_asks_for_the_go_its_constraint_and_imports_need(head, minor) -> None:
    assert sources.file_needs(head) == minor


def test_a_go_line_older_than_its_files_gets_the_go_its_files_need(tmp_path) -> None:
    # samber/lo's shape: go 1.18, and a package behind //go:build go1.23 that uses iter
    repo = write(tmp_path, {"go.mod": go_mod("example.com/lo", "1.18"), "lo.go": "package lo\n",
                            "it/seq.go": "//go:build go1.23\n\npackage it\n\nimport \"iter\"\n",
                            "compat.go": "//go:build !go1.21\n\npackage lo\n"})  # fmt: skip
    found = project.detect(repo)
    assert found is not None and found.runtime == "1.23.12"
    assert "it/seq.go says go1.23" in found.why
    older = write(
        tmp_path / "old", {"go.mod": go_mod("example.com/o", "1.16"), "o.go": "package o\n"}
    )
    assert project.detect(older).runtime == DEBIAN_GO  # nothing asks more: Debian's is enough
    newer = write(tmp_path / "new", {"go.mod": go_mod("example.com/n", "1.24"),
                                     "n.go": "package n\n\nimport \"slices\"\n"})  # fmt: skip
    assert project.detect(newer).runtime == "1.24.13"  # the go line, newer than the files' ask
    pinned = write(tmp_path / "pin", {"go.mod": go_mod("example.com/p", "1.21.0"),
                                      "p.go": "package p\n\nimport \"slices\"\n"})  # fmt: skip
    assert project.detect(pinned).runtime == "1.21.0"  # the files' minor: the go line's patch kept


def test_the_go_of_a_commit_is_the_same_every_time_and_follows_its_files(tmp_path) -> None:
    repo = RepoBuilder(tmp_path / "lo")
    first = repo.commit("lo", {"go.mod": go_mod("example.com/lo", "1.18"), "lo.go": "package lo\n"})
    tagged = repo.commit("iter", {"it/seq.go": "//go:build go1.23\n\npackage it\n"})
    later = repo.commit("docs", {"README.md": "lo\n"})
    assert detect_at(str(repo.path), first).runtime == DEBIAN_GO
    runs = [detect_at(str(repo.path), tagged) for _ in range(3)]
    assert {d.runtime for d in runs} == {"1.23.12"} and len({d.why for d in runs}) == 1
    assert detect_at(str(repo.path), later).runtime == "1.23.12"
    assert detect_at(str(repo.path), first).runtime == DEBIAN_GO  # the working copy is at later


EXTERNAL_TEST = 'package errors_test\n\nimport (\n\t"fmt"\n\n\t"github.com/pkg/errors"\n)\n'


@pytest.mark.parametrize(
    ("files", "path", "whence"),
    [
        ({"errors.go": 'package errors // import "github.com/pkg/errors"\n'},
         "github.com/pkg/errors", "errors.go's import comment"),
        ({"a/b.go": 'package b /* import "example.com/x/a" */\n', "x.go": "package x\n"},
         "example.com/x", "a/b.go's import comment"),
        ({"errors.go": "package errors\n",
          "example_test.go": EXTERNAL_TEST},
         "github.com/pkg/errors", "example_test.go's import of the root package"),
        ({"main.go": "package main\n"}, project.PLACEHOLDER_MODULE, "a placeholder"),
    ],
)  # fmt: skip
def test_a_pre_module_tree_is_go_with_the_module_path_its_files_name(
    tmp_path, files, path, whence
) -> None:
    found = project.detect(write(tmp_path, files))
    assert found is not None and found.package_manager == project.PRE_MODULE
    assert found.runner_args == (f"{path}=.",) and found.runtime == DEBIAN_GO
    assert whence in found.evidence[0]
    dockerfile = recipe(found)
    assert f"go mod init {path}" in dockerfile and "go mod tidy" in dockerfile
    assert f"cp go.mod go.sum {PRE_MODULE_FILES}/" in dockerfile
    assert "GOFLAGS=-mod=mod" in dockerfile
    command = runners.test_command(found)
    # the run lays the build's go.mod into the tree and takes it away after: never in a diff
    assert f"cp {PRE_MODULE_FILES}/go.mod" in command and "rm -f go.mod go.sum" in command


def test_a_pre_module_commit_is_detected_from_its_tree(tmp_path) -> None:
    repo = RepoBuilder(tmp_path / "errors")
    commit = repo.commit(
        "errors", {"errors.go": 'package errors // import "github.com/pkg/errors"\n'}
    )
    assert language_at(str(repo.path), commit).name == "go"
    assert detect_at(str(repo.path), commit).runner_args == ("github.com/pkg/errors=.",)


def test_a_vendored_module_builds_with_mod_vendor_and_downloads_nothing(tmp_path) -> None:
    repo = write(tmp_path, {"go.mod": go_mod("example.com/v", "1.16"),
                            "vendor/modules.txt": "# example.com/dep v1.0.0\n"})  # fmt: skip
    found = project.detect(repo)
    assert found is not None and found.package_manager == "go-vendor"
    assert found.runtime == DEBIAN_GO
    dockerfile = recipe(found)
    assert "GOFLAGS=-mod=vendor" in dockerfile
    assert "go mod download" not in dockerfile
    assert "golang.org/toolchain" not in dockerfile


def test_a_workspace_tests_its_use_folders_with_the_newest_go_they_ask(tmp_path) -> None:
    repo = write(tmp_path, {
        "go.work": "go 1.21\n\nuse (\n\t./api\n\t./core // the core\n)\n",
        "api/go.mod": go_mod("example.com/api", "1.21"),
        "core/go.mod": go_mod("example.com/core", "1.22", "1.22.7"),
        "old/go.mod": go_mod("example.com/old", "1.23"),  # not in the workspace
    })  # fmt: skip
    found = project.detect(repo)
    assert found is not None
    assert found.runner_args == ("example.com/api=api", "example.com/core=core")
    assert found.runtime == "1.22.7"
    assert found.evidence == ("go.work", "api/go.mod: go 1.21",
                              "core/go.mod: go 1.22, toolchain go1.22.7")  # fmt: skip
    assert "2 modules from go.work" in found.why


def test_nested_modules_without_a_root_are_each_tested(tmp_path) -> None:
    repo = write(tmp_path, {
        "README.md": "",
        "svc/a/go.mod": go_mod("example.com/a", "1.19"),
        "lib/go.mod": go_mod("example.com/lib", "1.18"),
        "lib/testdata/x/go.mod": go_mod("example.com/fixture", "1.25"),  # fixtures: skipped
        "_old/go.mod": go_mod("example.com/old", "1.25"),  # go skips _folders
    })  # fmt: skip
    found = project.detect(repo)
    assert found is not None
    assert [(m.folder, m.path) for m in project.modules(found)] == [
        ("lib", "example.com/lib"), ("svc/a", "example.com/a")]  # fmt: skip
    assert found.runtime == DEBIAN_GO
    assert modules_in_recipe(recipe(found)) == {"example.com/lib": "lib", "example.com/a": "svc/a"}


def test_a_fetched_toolchain_is_downloaded_in_the_build_and_pinned_in_the_image(tmp_path) -> None:
    found = project.detect(write(tmp_path, {"go.mod": go_mod("example.com/m", "1.21")}))
    assert found is not None
    dockerfile = recipe(found)
    build, final = dockerfile.split("\nFROM ${BASE}\n")
    assert "golang.org/toolchain@v0.0.1-go1.21.13.linux-$(go env GOARCH)" in build
    assert "go mod download" in build and "go test -count=1 -vet=off -run '^$'" in build
    assert "GOTOOLCHAIN=go1.21.13" in final and "GOPROXY=off" in final
    assert "GOSUMDB=off" in final and "CGO_ENABLED=1" in final
    assert "go mod download" not in final and "proxy" not in final.lower().replace("goproxy", "")


def run_script(command: str, cwd: str, *args: str) -> list[str]:
    """The test command run with a fake ``go`` that prints where it ran and with what."""
    fake = os.path.join(cwd, ".bin")
    os.makedirs(fake, exist_ok=True)
    with open(os.path.join(fake, "go"), "w") as handle:
        handle.write('#!/bin/sh\necho "$(pwd -P)|$*" >> "$CALLS"\n')
    os.chmod(os.path.join(fake, "go"), 0o755)
    calls = os.path.join(cwd, ".calls")
    env = {"PATH": f"{fake}:/usr/bin:/bin", "CALLS": calls}
    subprocess.run(f"{command} {' '.join(args)}", shell=True, cwd=cwd, env=env, check=True)
    root = os.path.realpath(cwd)
    with open(calls) as handle:
        return [line.strip().replace(root, "<repo>") for line in handle]


def test_the_command_runs_every_module_and_a_selection_in_its_own_module(tmp_path) -> None:
    repo = write(tmp_path, {
        "go.work": "use (\n\t.\n\tsub\n\tsub/deep\n)\n",
        "go.mod": go_mod("example.com/m"),
        "sub/go.mod": go_mod("example.com/sub"),
        "sub/deep/go.mod": go_mod("example.com/deep"),
    })  # fmt: skip
    found = project.detect(repo)
    assert found is not None
    flags = "test -json -count=1 -p 2 -vet=off -timeout 0"  # each test: the watcher's
    whole = runners.test_command(found, (), 30)
    assert runners.REPORT_PATH in whole
    assert run_script(whole, repo) == [
        f"<repo>|{flags} ./...",
        f"<repo>/sub|{flags} ./...",
        f"<repo>/sub/deep|{flags} ./...",
    ]
    os.remove(os.path.join(repo, ".calls"))
    chosen = ["internal/x::TestA", ".::TestB/sub", "sub::TestC", "sub/deep/y::TestD",
              "subway::TestE"]  # fmt: skip
    assert run_script(runners.test_command(found, chosen, 30), repo) == [
        f"<repo>|{flags} . ./internal/x ./subway",
        f"<repo>/sub|{flags} .",
        f"<repo>/sub/deep|{flags} ./y",
    ]


def test_language_at_names_a_go_module_or_workspace_from_its_top_level_files(tmp_path) -> None:
    repo = RepoBuilder(tmp_path / "ws")
    rooted = repo.commit("module", {"go.mod": go_mod("example.com/m", "1.21")})
    work = repo.commit("workspace", {"go.mod": None, "go.work": "go 1.21\n\nuse ./a\n",
                                     "a/go.mod": go_mod("example.com/a", "1.21")})  # fmt: skip
    assert language_at(str(repo.path), rooted).name == "go"
    assert language_at(str(repo.path), work).name == "go"  # a.go.mod is not a top-level file
    found = detect_at(str(repo.path), work)  # the profile reads every module's go.mod
    assert found.runner_args == ("example.com/a=a",) and found.runtime == "1.21.13"


def test_language_at_names_a_monorepo_of_nested_modules_go(tmp_path) -> None:
    # no go.mod or go.work at the root: the modules' go.mods below it decide
    repo = RepoBuilder(tmp_path / "mono")
    modules = {
        "README.md": "tools\n",
        "api/go.mod": go_mod("example.com/api", "1.19"),
        "cli/x/go.mod": go_mod("example.com/cli", "1.19"),
    }
    nested = repo.commit("two modules", modules)
    too_deep = {"api/go.mod": None, "cli/x/go.mod": None,
                "a/b/c/d/e/f/go.mod": go_mod("example.com/f")}  # fmt: skip
    deep = repo.commit("only too deep", too_deep)
    assert language_at(str(repo.path), nested).name == "go"
    assert detect_at(str(repo.path), nested).runner_args == (
        "example.com/api=api", "example.com/cli=cli/x",
    )  # fmt: skip
    assert language_at(str(repo.path), deep).name == "python"  # the default: nothing detected


def test_a_workspace_builds_without_mod_flags_and_without_go_mod_download(tmp_path) -> None:
    repo = write(tmp_path, {"go.work": "go 1.19\n\nuse ./a\n",
                            "a/go.mod": go_mod("example.com/a", "1.19")})  # fmt: skip
    found = project.detect(repo)
    assert found is not None and found.package_manager == "go-work"
    dockerfile = recipe(found)
    # the go command refuses -mod=mod in workspace mode, and its go mod download looks for the
    # workspace's own modules on the proxy
    assert "GOFLAGS" not in dockerfile and "go mod download" not in dockerfile
    assert "go test -count=1 -vet=off -run '^$'" in dockerfile


def test_the_language_answers_through_the_registry_and_reads_ids_by_the_recipe_s_modules(
    tmp_path,
) -> None:
    repo = write(tmp_path, {"go.mod": go_mod("example.com/calc", "1.19")})
    language, found = for_repo(repo) or (None, None)
    assert language is spelled("golang") and found is not None and language.name == "go"
    assert language.base_image(found) == "trajforge-base:go"
    assert language.render_recipe(found) == recipe(found)
    assert language.test_command(found, ("internal/x::TestA",), 9).endswith(" internal/x")
    events = "\n".join(json.dumps(e) for e in [
        {"Action": "run", "Package": "example.com/calc/internal/x", "Test": "TestA"},
        {"Action": "pass", "Package": "example.com/calc/internal/x", "Test": "TestA"},
    ])  # fmt: skip
    # without the recipe's modules a package keeps its import path...
    assert language.parse_report(events, "go") == {"example.com/calc/internal/x::TestA": "PASSED"}
    profile = EnvProfile("p", "calc", "", (), language.test_command(found), "img", "built", "", "",
                         recipe=recipe(found), language="go", runner="go")  # fmt: skip
    reading = go_reading(profile)
    # ...with them, its folder; a selection passes package folders
    assert reading.parse is not None and reading.select is not None
    assert reading.parse(events.encode(), "").statuses == {"internal/x::TestA": "PASSED"}
    assert reading.parse(None, "").collection_errors == ("go test wrote no report",)
    assert list(reading.select(["internal/x::TestA", ".::TestB/sub", "internal/x::TestC"])) == [
        ".", "internal/x"]  # fmt: skip
