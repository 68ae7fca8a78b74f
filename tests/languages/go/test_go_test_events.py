"""Go's test ids and ``go test -json`` reader, on streams the host's go command writes for a
module this test creates (so the events are the real format, not a transcription)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from trajforge.verifiers.languages.go import test_events as events
from trajforge.verifiers.languages.go.test_events import (
    ReportError,
    parse_test_events,
    read_modules,
)

GO = shutil.which("go")
MODULE = "example.com/calc"
FILES = {
    "go.mod": f"module {MODULE}\n\ngo 1.19\n",
    "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
    "calc_test.go": """package calc

import "testing"

func TestAdd(t *testing.T) {
	t.Run("pos", func(t *testing.T) {
		if Add(1, 2) != 3 {
			t.Fatal("1+2")
		}
	})
	t.Run("neg case", func(t *testing.T) {
		if Add(-1, -2) != -4 {
			t.Fatal("-1-2")
		}
	})
}

func TestSkipped(t *testing.T) { t.Skip("later") }
""",
    "deep/inner/inner_test.go": """package inner

import "testing"

func TestPanics(t *testing.T) { panic("boom") }
""",
    "broken/broken_test.go": """package broken

import "testing"

func TestNever(t *testing.T) { undefined() }
""",
}


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> str:
    if GO is None:  # the machines this project runs on have Go; a missing one is a setup error
        pytest.fail("no go command on PATH: make setup's machines have one")
    root = tmp_path_factory.mktemp("calc")
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    done = subprocess.run(
        [GO, "test", "-json", "-count=1", "./..."], cwd=root, capture_output=True, text=True,
        env={"PATH": str(Path(GO).parent), "HOME": str(root), "GOFLAGS": "-mod=mod",
             "GOPROXY": "off", "GOTOOLCHAIN": "local", "GOCACHE": str(root / ".cache")},
    )  # fmt: skip
    return done.stdout + done.stderr


def test_every_outcome_has_its_id(stream: str) -> None:
    parsed = parse_test_events(stream, read_modules({".": FILES["go.mod"]}))
    assert parsed.problem == ""
    assert parsed.statuses == {
        ".::TestAdd/pos": "PASSED",
        ".::TestAdd/neg_case": "FAILED",  # the testing package writes a space as _
        ".::TestAdd": "FAILED",
        ".::TestSkipped": "SKIPPED",
        "deep/inner::TestPanics": "FAILED",
    }
    assert parsed.collection_errors == ("broken",)


def test_a_module_in_a_subfolder_maps_to_its_folder() -> None:
    modules = read_modules({"tools/gen": 'module "example.com/calc/tools"\n', ".": FILES["go.mod"]})
    assert modules == {"example.com/calc/tools": "tools/gen", MODULE: "."}
    event = {"Action": "pass", "Package": "example.com/calc/tools/x", "Test": "TestY"}
    parsed = parse_test_events(json.dumps(event), modules)
    assert parsed.statuses == {"tools/gen/x::TestY": "PASSED"}


def test_a_test_that_never_ended_failed() -> None:
    lines = [
        {"Action": "run", "Package": MODULE, "Test": "TestHangs"},
        {"Action": "output", "Package": MODULE, "Output": "panic: test timed out after 1s\n"},
        {"Action": "fail", "Package": MODULE},
    ]
    parsed = parse_test_events("\n".join(map(json.dumps, lines)), {MODULE: "."})
    assert parsed.statuses == {".::TestHangs": "FAILED"}


def test_a_second_end_is_a_contradiction() -> None:
    lines = [
        {"Action": "run", "Package": MODULE, "Test": "TestA"},
        {"Action": "fail", "Package": MODULE, "Test": "TestA"},
        {"Action": "pass", "Package": MODULE, "Test": "TestA"},
    ]
    parsed = parse_test_events("\n".join(map(json.dumps, lines)), {MODULE: "."})
    assert parsed.statuses == {}
    assert "TestA reported ended twice" in parsed.problem


def test_hostile_lines_are_skipped_and_ids_stay_one_line() -> None:
    lines = [
        "not an event",
        "{broken json",
        json.dumps(["a list"]),
        json.dumps({"Action": 3, "Package": MODULE, "Test": "TestX"}),
        json.dumps({"Action": "pass", "Package": MODULE, "Test": "TestNew\nline"}),
    ]
    parsed = parse_test_events("\n".join(lines), {MODULE: "."})
    assert parsed.statuses == {".::TestNew\\x0aline": "PASSED"}


def test_an_oversized_stream_is_one_line() -> None:
    with pytest.raises(ReportError, match="go test -json report is"):
        parse_test_events("x" * (64 * 1024 * 1024 + 1), {})


def test_ids_name_their_package_folder() -> None:
    assert events.test_id("", "TestA") == ".::TestA"
    assert events.package_dir(events.test_id("internal/calc", "TestAdd/neg")) == "internal/calc"


def test_a_build_failure_before_go_1_24_is_a_plain_line() -> None:
    # Debian's go 1.19 writes it on stdout between the events (go 1.24 made it an event)
    lines = [
        json.dumps({"Action": "pass", "Package": MODULE, "Test": "TestA"}),
        f"FAIL\t{MODULE}/broken [build failed]",
    ]
    parsed = parse_test_events("\n".join(lines), {MODULE: "."})
    assert parsed.statuses == {".::TestA": "PASSED"}
    assert parsed.collection_errors == ("broken",)
