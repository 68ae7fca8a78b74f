"""Rows and requests written by someone else: nothing they hold may write outside ``--output``,
crash a command, hold a thread, or cost memory beyond one bounded row.

Real files through the real CLI (``evaluate`` with tasks it does not know, so no container runs;
``import-tasks`` over a repository built here), and the real reward service behind ``serve`` on
a real socket, each row type that broke them (issue 26, item 8): ``..``, ``/``, absolute paths,
NUL and 5,000-character names as instance id or model; a 61 MB row; JSON nested 100,000 deep; a
lone surrogate; a huge integer; a slow, trickling, lying or oversized HTTP client.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TRAJFORGE, write_params
from curated_factory import make_task, write_curated
from test_import_tasks import UPSTREAM, Calc, swe_bench_row
from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.pipelines.evaluation.predictions import read_predictions
from trajforge.pipelines.evaluation.run import model_dir, path_name
from trajforge.pipelines.evaluation.service import RewardService, serve
from trajforge.schemas import json_rows
from trajforge.schemas.params import load_params

BIG = 61 * 1024 * 1024  # the row of the issue
DEEP = "[" * 100_000 + "]" * 100_000


# A small Python starts the command and reports its children's peak RSS: a process started from
# the test's own (vfork, then exec) would count the pytest worker's peak as its own (the kernel
# keeps the old memory's high-water mark through exec), and a worker that ran many tests is large.
_MEASURED = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def _run(*args: str, cwd: Path) -> tuple[int, str, str, int]:
    """The real console script: (exit code, stdout, stderr, peak RSS in MB of it and below)."""
    with tempfile.TemporaryDirectory() as scratch:
        peak = Path(scratch) / "peak-kb"
        proc = subprocess.run(
            [sys.executable, "-c", _MEASURED, str(peak), TRAJFORGE, *args],
            cwd=cwd, capture_output=True, text=True,
        )  # fmt: skip
        return proc.returncode, proc.stdout, proc.stderr, int(peak.read_text()) // 1024


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# 1. names from a row are one safe path component ------------------------------------------------

HOSTILE_NAMES = [
    ("..", "m"),
    ("plain-1", ".."),
    ("../../escaped", "../.."),
    ("/etc/passwd", "/abs/model"),
    ("nul\x00byte", "org/model"),
    ("L" * 5000, "org__model"),  # SWE-bench would write org/model and org__model to one folder
    ("plain-1", "org/model"),
    ("a/b", "m"),
    ("a_b", "m"),  # what a/b would be as a slug: its own folder all the same
    (".hidden", "-rf"),
]


def test_names_are_single_components_and_distinct_values_never_meet():
    ids = {i for i, _ in HOSTILE_NAMES} | {"django__django-11099", "a~b", "a_b~1234"}
    models = {m for _, m in HOSTILE_NAMES} | {"gpt-4o", "a_/b", "a/_b", "a__b", "a~b"}
    for names, make in ((ids, path_name), (models, model_dir)):
        made = {make(v): v for v in names}
        assert len(made) == len(names), made  # injective
        for name in made:
            assert name not in ("", ".", "..") and "/" not in name and "\x00" not in name
            assert len(name.encode()) <= 120 and not name.startswith((".", "-"))
    # SWE-bench's layout where it is safe
    assert path_name("django__django-11099") == "django__django-11099"
    assert model_dir("openai/gpt-4o") == "openai__gpt-4o" and model_dir("m") == "m"


def _tasks(tmp_path: Path, cache: Path | None = None) -> Path:
    write_params(tmp_path / "params.yaml", cache or tmp_path / "cache")
    write_curated(tmp_path / "tasks", [make_task("acme/alpha", 1)])
    return tmp_path / "tasks"


def test_evaluate_writes_every_row_under_output_even_a_new_one(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    _tasks(work, tmp_path.parent / f"{tmp_path.name}-cache")
    rows = [{"instance_id": i, "model_name_or_path": m, "model_patch": "x"}
            for i, m in HOSTILE_NAMES]  # fmt: skip
    (work / "preds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = _files(tmp_path)
    code, out, err, _ = _run(
        "evaluate", "--tasks", "tasks", "--predictions", "preds.jsonl",
        "--output", "deep/new/out", "--sandbox", "local", cwd=work,
    )  # fmt: skip
    assert code == 0 and "Traceback" not in err, err
    output = work / "deep" / "new" / "out"
    outside = {p for p in _files(tmp_path) - before if not p.startswith("work/deep/new/out")}
    assert outside == {"work/deep", "work/deep/new"}, outside  # nothing outside --output
    # ("plain-1", "org/model") is a duplicate instance id: the first is kept
    evaluations = sorted(output.glob("*/*/evaluation.json"))
    assert len(evaluations) == len(HOSTILE_NAMES) - 1
    ids = {json.loads(p.read_text())["instance_id"] for p in evaluations}
    assert ids == {i for i, _ in HOSTILE_NAMES}
    assert (output / "m" / path_name("a/b") / "report.json").exists()
    assert (output / "m" / "a_b" / "report.json").exists()
    assert "duplicate_prediction" in out


def test_a_link_inside_output_is_not_followed_out(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    _tasks(work)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (work / "out").mkdir()
    (work / "out" / "m").symlink_to(elsewhere)
    rows = [{"instance_id": "one", "model_name_or_path": "m", "model_patch": "x"},
            {"instance_id": "two", "model_name_or_path": "n", "model_patch": "x"}]  # fmt: skip
    (work / "preds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err, _ = _run(
        "evaluate", "--tasks", "tasks", "--predictions", "preds.jsonl", "--output", "out",
        "--sandbox", "local", cwd=work,
    )  # fmt: skip
    assert code == 0 and "Traceback" not in err, err
    assert list(elsewhere.iterdir()) == []
    assert "unsafe_output_path" in out and (work / "out" / "n" / "two" / "report.json").exists()


# 2. rows bounded before they are parsed ---------------------------------------------------------


def _hostile_lines(good: str) -> list[bytes]:
    return [
        json.dumps({"instance_id": "big", "model_patch": "+" * BIG}).encode(),
        DEEP.encode(),
        b'{"instance_id": "lone", "model_patch": "\\ud800"}',
        b'{"instance_id": "digits", "n": ' + b"9" * 5000 + b"}",
        b'{"instance_id": "pair \\ud83d\\ude00", "model_patch": "x"}',  # a valid pair is fine
        good.encode(),
    ]


def test_evaluate_counts_hostile_rows_and_goes_on_in_bounded_memory(tmp_path):
    _tasks(tmp_path)
    good = json.dumps({"instance_id": "good", "model_name_or_path": "m", "model_patch": "x"})
    (tmp_path / "small.jsonl").write_text(good + "\n")
    (tmp_path / "preds.jsonl").write_bytes(b"\n".join(_hostile_lines(good)) + b"\n")
    code, _, err, small_mb = _run(
        "evaluate", "--tasks", "tasks", "--predictions", "small.jsonl", "--output", "o1",
        "--sandbox", "local", cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    code, out, err, big_mb = _run(
        "evaluate", "--tasks", "tasks", "--predictions", "preds.jsonl", "--output", "o2",
        "--sandbox", "local", cwd=tmp_path,
    )  # fmt: skip
    assert code == 0 and "Traceback" not in err, err
    assert big_mb - small_mb < 150, (small_mb, big_mb)  # one capped line at most, not 1.2 GB
    lines = out.splitlines()
    assert any("preds.jsonl:1: " in line and "over the limit" in line for line in lines), out
    assert any("preds.jsonl:2: JSON nested too deeply" in line for line in lines), out
    assert any("preds.jsonl:3: a string holds a lone surrogate (\\ud800)" in line for line in lines)
    assert any("preds.jsonl:4: not readable JSON" in line for line in lines), out
    summary = json.loads((tmp_path / "o2" / "m.evaluate.json").read_text())
    assert summary["submitted_ids"] == ["good"]
    assert len(summary["trajforge"]["malformed_predictions"]) == 4
    assert "     1  row_too_large" in out and "     3  malformed_prediction" in out
    assert (tmp_path / "o2" / "unknown-model" / path_name("pair \U0001f600")).is_dir()


@pytest.mark.parametrize("shape", ["list", "keyed"])
def test_a_json_document_over_the_row_limit_is_read_row_by_row(tmp_path, shape):
    rows = {
        "huge": {"model_patch": "+" * (json_rows.MAX_ROW_BYTES + 10)},
        "deep": {"model_patch": json.loads("[" * 500 + "]" * 500)},
        "ok": {"model_patch": "x", "model_name_or_path": "m"},
    }
    if shape == "list":
        data = json.dumps([{"instance_id": k, **v} for k, v in rows.items()])
    else:  # over several lines, as SWE-bench's keyed predictions are written
        data = "{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in rows.items())
        data += "\n}\n"
    data = data.replace("[" * 500 + "]" * 500, DEEP)  # deeper than json.dumps would write
    (tmp_path / "p.json").write_text(data)
    predictions, problems = read_predictions(str(tmp_path / "p.json"))
    assert [p.instance_id for p in predictions] == ["ok"]
    assert sorted(p.reason for p in problems) == ["malformed_prediction", "row_too_large"]
    assert any("nested too deeply" in p.detail for p in problems)


def test_a_line_is_held_to_the_limit_exactly_and_a_longer_one_never_held():
    def read(data: bytes) -> list:
        return [v.reason if isinstance(v, json_rows.RowError) else json_rows.loads(v, 10)
                for _, v in json_rows.lines(io.BytesIO(data), 10)]  # fmt: skip

    assert read(b'"12345678"\n1\n') == ["12345678", 1]  # 10 bytes and its newline
    assert read(b'"123456789"\r\n1') == ["row_too_large", 1]
    assert read(b'"' + b"x" * 5_000_000 + b'"\n{"a": 1}\n') == ["row_too_large", {"a": 1}]


# import-tasks ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def calc(tmp_path_factory: pytest.TempPathFactory) -> Calc:
    return Calc(tmp_path_factory.mktemp("hostile-import"))


def test_import_tasks_rejects_each_hostile_row_by_name_and_keeps_the_good_one(calc, tmp_path):
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    good = swe_bench_row(calc)
    bad_labels = swe_bench_row(calc, instance_id="lone-label", FAIL_TO_PASS='["t\\udc00"]')
    deep_labels = swe_bench_row(calc, instance_id="deep-label", FAIL_TO_PASS=DEEP)
    bad_date = swe_bench_row(calc, instance_id="when", created_at=1e300)
    lines = [
        json.dumps({**good, "instance_id": "big", "patch": "+" * BIG}).encode(),
        DEEP.encode(),
        json.dumps(good).encode().replace(b'"add() subtracts', b'"\\ud800 add() subtracts'),
        json.dumps(bad_labels).encode(),
        json.dumps(deep_labels).encode(),
        json.dumps(bad_date).encode(),
        json.dumps(good).encode(),
    ]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "rows.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    # a JSON list over the row limit (read member by member) and Parquet with a huge cell
    huge = {**good, "instance_id": "big-in-list", "patch": "+" * (json_rows.MAX_ROW_BYTES + 1)}
    listed = b"[" + json.dumps(huge).encode() + b",\n" + DEEP.encode() + b"]"
    (tmp_path / "in" / "listed.json").write_bytes(listed)
    table = pa.Table.from_pylist(
        [{**good, "instance_id": "big-in-parquet", "patch": "+" * (json_rows.MAX_ROW_BYTES + 1)}]
    )
    pq.write_table(table, tmp_path / "in" / "big.parquet")
    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "rows.jsonl").write_text(json.dumps(good) + "\n")
    source = f"{UPSTREAM}={calc.path}"
    code, _, err, small_mb = _run(
        "import-tasks", "--format", "swe-bench", "small", "--source", source, "--output", "o1",
        cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    code, _, err, mb = _run(
        "import-tasks", "--format", "swe-bench", "in", "--source", source, "--output", "out",
        cwd=tmp_path,
    )  # fmt: skip
    assert code == 0 and "Traceback" not in err, err
    assert mb - small_mb < 150, (small_mb, mb)  # one capped row at most, not the 61 MB one's copies
    rejections = pq.read_table(tmp_path / "out" / "rejections").to_pylist()
    by_input = {r["input"]: (r["reason"], r["detail"]) for r in rejections}
    rows = str(Path("in") / "rows.jsonl")
    assert by_input[f"{rows}:1"][0] == "row_too_large"
    assert by_input[f"{rows}:2"] == (
        "bad_row",
        f"{rows}:2: JSON nested too deeply to read; fix it",
    )
    assert "lone surrogate (\\ud800)" in by_input[f"{rows}:3"][1]
    assert "lone surrogate (\\udc00)" in by_input["lone-label"][1]
    assert "not a readable JSON list" in by_input["deep-label"][1]
    assert "created_at 1e+300 is not a date" in by_input["when"][1]
    assert by_input[str(Path("in") / "listed.json") + "#row=0"][0] == "row_too_large"
    assert "nested too deeply" in by_input[str(Path("in") / "listed.json") + "#row=1"][1]
    assert by_input[str(Path("in") / "big.parquet") + "#row=0"][0] == "row_too_large"
    candidates = pq.read_table(tmp_path / "out" / "candidates").to_pylist()
    assert [c["labels"]["instance_id"] for c in candidates] == ["calc-org__calc-1"]


# 3. the reward service: no client holds a thread ---------------------------------------------


@pytest.fixture
def service(tmp_path):
    write_params(tmp_path / "params.yaml", tmp_path / "cache", "sandbox:\n  kind: local\n")
    evaluator = Evaluator(load_params(str(tmp_path / "params.yaml")))
    reward = RewardService(evaluator, {}, workers=1, queue_size=1, max_patch_bytes=10_000)
    server = serve(reward, port=0, read_timeout_s=1.0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield reward, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        reward.close()


SMALL_DEEP = "[" * 5000 + "]" * 5000  # past the parser, within the service's body limit


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _answer(sock: socket.socket) -> tuple[int, dict]:
    """One HTTP answer read off the socket: (status, JSON body)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        sizes = [int(h.split(b":")[1]) for h in head.split(b"\r\n")
                 if h.lower().startswith(b"content-length")]  # fmt: skip
        if sizes and len(body) >= sizes[0]:
            break
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def _post(port: int, body: bytes, headers: str = "") -> tuple[int, dict]:
    with _connect(port) as sock:
        head = f"POST /reward HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{headers}\r\n"
        sock.sendall(head.encode() + body)
        return _answer(sock)


def _closed_by_server(sock: socket.socket, wait_s: float = 10) -> bool:
    """Whether the server closes ``sock`` (whatever it sends first) before the client would give
    up waiting; a server that holds the connection leaves the read to time out."""
    sock.settimeout(wait_s)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


def test_slow_and_trickling_clients_are_cut_and_others_are_served(service, capfd):
    reward, port = service
    idle = _connect(port)  # connects, sends nothing
    partial = _connect(port)
    partial.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\n")  # headers that never end
    trickle = _connect(port)

    def drip() -> None:
        try:
            for byte in b"POST /reward HTTP/1.1\r\nHost: x\r\n" * 100:
                trickle.sendall(bytes([byte]))
                time.sleep(0.2)  # each byte well within the read timeout, the whole never
        except OSError:
            pass

    dripping = threading.Thread(target=drip)
    dripping.start()
    assert _post(port, b'{"instance_id": "nope"}')[0] == 404  # served meanwhile
    for sock in (idle, partial, trickle):
        assert _closed_by_server(sock)
    dripping.join(10)
    assert not dripping.is_alive()  # the trickle was cut: the whole would take 11 minutes
    for sock in (idle, partial, trickle):
        sock.close()
    deadline = time.monotonic() + 5
    while _handlers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _handlers()  # no thread is left holding a connection
    assert reward.stats()["counts"]["refused:request_timeout"] == 1  # the partial headers
    assert "Traceback" not in capfd.readouterr().err


def _handlers() -> list[str]:
    return [t.name for t in threading.enumerate() if "process_request" in t.name]


def test_bodies_over_the_limit_lying_or_chunked_are_answered_at_once(service, capfd):
    reward, port = service
    # Each answer must come within the socket's 10 s timeout (``_connect``), or the read raises:
    # a server that waited for the body would not answer at all.
    # a Content-Length over the limit: 413 although no byte of the body is ever sent
    with _connect(port) as sock:
        sock.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n")
        status, body = _answer(sock)
        assert (status, body["reason"]) == (413, "patch_too_large")
    # a Content-Length that promises more than comes: 408 at the deadline, not a hang
    with _connect(port) as sock:
        sock.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{}")
        status, body = _answer(sock)
        assert (status, body["reason"]) == (408, "request_timeout")
    # a body cut short by the client
    with _connect(port) as sock:
        sock.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{}")
        sock.shutdown(socket.SHUT_WR)
        assert _answer(sock)[1]["reason"] == "body_incomplete"
    # no length at all: chunked is refused, a POST without a body is 400
    with _connect(port) as sock:
        sock.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        assert _answer(sock)[0] == 411
    assert _post(port, b"")[1]["reason"] == "no_body"
    # JSON the parser cannot follow, a lone surrogate: 400, counted, the service goes on
    assert _post(port, SMALL_DEEP.encode())[0] == 400
    lone = b'{"instance_id": "x", "patch": "\\ud800"}'
    assert _post(port, lone)[0] == 400
    assert _post(port, b'{"instance_id": "nope", "patch": "x"}')[0] == 404
    counts = reward.stats()["counts"]
    assert counts["refused:patch_too_large"] == 1 and counts["refused:request_timeout"] == 1
    assert counts["refused:malformed_request"] >= 2 and counts["refused:unknown_instance"] == 1
    assert "Traceback" not in capfd.readouterr().err
