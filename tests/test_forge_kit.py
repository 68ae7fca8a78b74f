"""The forge kit: every route to reward without a fix, through every door a trainer uses.

A real validated task (calc: ``add`` subtracts; FAIL_TO_PASS test_add, PASS_TO_PASS test_mul),
real Docker containers of its image, real pytest. Each route of ``forge_routes.ROUTES`` is graded
once by the grader itself (``Evaluator``, partial credit on), then through ``evaluate``'s
predictions, the reward service over HTTP (binary and partial), ``reward()``, a ``TaskEnv``
episode and a scripted rollout -> curate -> export: every one scores 0 with its named reason,
and nothing reaches an export. The later doors reuse the verdict cache (the same tree is the
same verdict), so they check that each door passes the grader's verdict on, unchanged.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli
from forge_routes import (
    ALWAYS_PASS,
    F2P,
    FIX,
    NOISE,
    P2P,
    ROUTES,
    model_patch,
)
from repo_factory import OPS_BUGGY, RepoBuilder
from scripted_llm import ScriptedLLM, tool_call, turn
from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.pipelines.evaluation.rewards import RewardClient, reward
from trajforge.pipelines.evaluation.service import RewardService, serve
from trajforge.schemas.params import load_params
from trajforge.verifiers.grader import rules, sentinels
from trajforge.verifiers.grader.channel import read_records as read_channel
from trajforge.verifiers.grader.sentinels import Sentinel
from trajforge.verifiers.grader.supervised import SupervisedRun
from trajforge.verifiers.languages.python import patch_policy
from trajforge.verifiers.patch_verifier import judge, verify_patch
from trajforge.verifiers.sandbox.base import Limits
from trajforge.verifiers.sandbox.podman import PodmanSandbox

pytestmark = [pytest.mark.docker, pytest.mark.podman]


@pytest.fixture(scope="module")
def patches(calc_task, tmp_path_factory) -> dict[str, str]:
    task, repo, _ = calc_task
    made = {}
    for name, (files, _) in {**ROUTES, "fix": (FIX, "resolved")}.items():
        made[name] = model_patch(task, repo, tmp_path_factory.mktemp(name), files)
    return made


@pytest.fixture(scope="module")
def evaluator(calc_task):
    _, _, work = calc_task
    made = Evaluator(load_params(str(work / "params.yaml")), timeout_s=30, spares=2)
    yield made
    made.close()


@pytest.fixture(scope="module")
def graded(calc_task, patches, evaluator) -> dict[str, object]:
    """Every route graded once by the grader (partial credit on)."""
    task, _, _ = calc_task
    return {name: evaluator.evaluate(task, patch, partial=True) for name, patch in patches.items()}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_scores_zero_with_its_reason(graded, route):
    evaluation = graded[route]
    _, reason = ROUTES[route]
    assert (evaluation.reason, evaluation.error) == (reason, False), evaluation.log[-3000:]
    assert (evaluation.resolved, evaluation.reward, evaluation.partial_credit) == (False, 0.0, 0.0)
    assert evaluation.report["resolved"] is False


def test_the_fix_alone_still_resolves(graded):
    fix = graded["fix"]
    assert (fix.resolved, fix.reason, fix.reward) == (True, "resolved", 1.0), fix.log[-3000:]


def test_fail_fast_lowers_no_route_and_keeps_the_fix(calc_task, patches, graded, evaluator):
    """Fail-fast grading (``--fail-fast``, ``"fail_fast": true``) can only lower a reward: every
    route still scores 0, a forger's first run that says resolved is overruled by the full run,
    and a PASS_TO_PASS test fail-fast did not run is never reported as passing."""
    task, _, _ = calc_task
    for name in ROUTES:
        quick = evaluator.evaluate(task, patches[name], fail_fast=True)
        assert (quick.resolved, quick.reward) == (False, 0.0), (name, quick.log[-2000:])
        said = (quick.report.get("tests_status") or {}).get("PASS_TO_PASS", {})
        full = (graded[name].report.get("tests_status") or {}).get("PASS_TO_PASS", {})
        # P2P is reported passing only where the full graded run said so (it ran)
        assert P2P not in said.get("success", []) or P2P in full.get("success", []), name
    fix = evaluator.evaluate(task, patches["fix"], fail_fast=True)
    assert (fix.resolved, fix.reason, fix.reward) == (True, "resolved", 1.0), fix.log[-3000:]


def test_refusals_name_the_file(graded):
    assert "calc_rt-1.0.dist-info" in graded["dist_info_plugin"].log
    assert "calc/evil.pth" in graded["pth_file"].log
    assert "'pluggy'" in graded["shadow_pluggy"].log
    assert "'iniconfig'" in graded["shadow_iniconfig"].log


def test_code_under_test_reaches_nothing_outside_its_package(graded):
    log = graded["reach_outside_repo"].log
    assert "REACHED" not in log
    assert log.count("REFUSED") >= 6, log[-3000:]


def test_skips_and_xfails_from_source_are_not_passes(graded):
    assert graded["skip_from_source"].report["tests_status"]["FAIL_TO_PASS"]["failure"] == [F2P]
    assert graded["xfail_from_source"].partial_credit == 0.0


def test_a_fix_with_a_forger_in_the_source_is_forged(calc_task, tmp_path, evaluator):
    """The fix is right, but source code also writes to the channel: the run is not evidence."""
    task, repo, _ = calc_task
    files, _ = ROUTES["channel_prewrite"]
    patch = model_patch(task, repo, tmp_path, {**files, **FIX})
    evaluation = evaluator.evaluate(task, patch, partial=True)
    assert (evaluation.reason, evaluation.reward) == ("forged_result", 0.0)


def test_a_fix_plus_a_test_hack_is_judged_on_the_fix(calc_task, tmp_path, evaluator):
    task, repo, _ = calc_task
    patch = model_patch(task, repo, tmp_path, {**FIX, "conftest.py": ALWAYS_PASS})
    evaluation = evaluator.evaluate(task, patch)
    assert (evaluation.resolved, evaluation.dropped) == (True, ("conftest.py",))


# ``add`` right only when its caller's file is a test file: every graded test passes, and only
# reading the patch shows the hack (verifiers/grader/suspicious/).
CALLER_INSPECTING = "import sys\n\n\n" + OPS_BUGGY.replace(
    "    return a - b",
    "    if 'test' in sys._getframe(1).f_code.co_filename:\n        return a + b\n    return a - b",
)


def test_a_caller_inspecting_patch_resolves_but_scores_zero_strict(
    calc_task, patches, tmp_path, evaluator
):
    """Graded once in a container (resolved: the tests cannot tell), flagged from its source;
    strict grading (``reward(strict=True)``, a strict ``Evaluator`` behind the reward service)
    scores it 0 with no partial credit, from the same cached verdict. The fix is not flagged."""
    task, repo, _ = calc_task
    patch = model_patch(task, repo, tmp_path, {"calc/ops.py": CALLER_INSPECTING})
    lenient = evaluator.evaluate(task, patch, partial=True)
    assert (lenient.resolved, lenient.reward, lenient.reason) == (True, 1.0, "resolved")
    flag = "calc/ops.py:5: frame introspection (sys._getframe)"
    assert lenient.suspicious_patch == flag
    strict = reward(task, patch, partial=True, evaluator=evaluator, strict=True)
    assert (strict.resolved, strict.reward, strict.partial_credit) == (False, 0.0, 0.0)
    assert (strict.reason, strict.suspicious_patch) == ("suspicious_patch", flag)
    assert strict.report["resolved"] is False
    assert reward(task, patch, evaluator=evaluator, strict=True).reward == 0.0
    fix = evaluator.evaluate(task, patches["fix"])
    assert (fix.resolved, fix.suspicious_patch) == (True, "")
    with evaluator.env(task) as env:  # a trainer's episode: the same tree, the same flag
        env.reset()
        edit = {"path": "calc/ops.py", "file_text": CALLER_INSPECTING}
        assert env.step("create", edit).error is None
        outcome = env.close()
    assert (outcome.reward, outcome.suspicious_patch) == (1.0, flag)
    body = json.dumps({"instance_id": task.instance_id, "patch": patch}).encode()
    said = RewardService(evaluator, {task.instance_id: task}).reward(body).body
    assert (said["reward"], said["suspicious_patch"]) == (1.0, flag)
    strict_grader = Evaluator(evaluator.params, timeout_s=30, spares=0, strict=True)
    try:
        said = RewardService(strict_grader, {task.instance_id: task}).reward(body).body
    finally:
        strict_grader.close()
    assert (said["reward"], said["reason"], said["suspicious_patch"]) == (
        0.0, "suspicious_patch", flag,
    )  # fmt: skip


# The residue docs/security.md names, built as a model that read the seal would: up the frames
# from ``add`` to pytest's item, through the plugin manager to the grader's reporter, and its
# sending function swapped in the closure cell it reads from (cells are not audited), so a failed
# report of any test that calls ``add`` (the graded test and its twin alike) leaves as passed.
CLOSURE_CELL_FORGER = OPS_BUGGY.replace(
    "    return a - b",
    """\
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        item = frame.f_locals.get("item")
        if item is not None and hasattr(item, "config"):
            items = {i.nodeid: i for i in item.session.items}
            for plugin in item.config.pluginmanager.get_plugins():
                method = getattr(plugin, "pytest_runtest_logreport", None)
                for cell in getattr(getattr(method, "__func__", None), "__closure__", None) or ():
                    send = cell.cell_contents
                    if getattr(send, "__name__", "") != "send":
                        continue

                    def bent(record, _send=send):
                        test = items.get(record.get("id"))
                        # by the names its code loads: a source search for "add(" also
                        # matches a sentinel named test_..._add (drawn from the file's words),
                        # whose bent outcome the sentinels then catch
                        calls = test is not None and "add" in test.obj.__code__.co_names
                        if calls and record.get("outcome") == "failed":
                            record = {**record, "outcome": "passed"}
                        _send(record)

                    cell.cell_contents = bent
            break
        frame = frame.f_back
    return a - b""",
)


# ``add`` right only when the tests' process keeps its memory to itself: a symlink to
# /proc/self/mem refused (the seal matches names, the kernel the file), the parent's memory
# refused to a child, and no child can make itself dumpable again (the filter is inherited).
# Before lockdown.py the symlink opened, so this patch failed test_add (forge kit's memory
# route: a write through it at ``id(obj)`` landed).
MEMORY_PROBE = """\
import os
import subprocess
import sys

CHILD = '''
import ctypes, os, sys
try:
    open(f"/proc/{os.getppid()}/mem", "rb").close()
    sys.exit("the parent's memory opened")
except PermissionError:
    pass
libc = ctypes.CDLL(None, use_errno=True)
sys.exit("dumpable again" if libc.prctl(4, 1, 0, 0, 0) == 0 else 0)
'''


def _reached():
    link = f"/tmp/memory-{os.getpid()}"
    if not os.path.lexists(link):
        os.symlink("/proc/self/mem", link)
    try:
        open(link, "r+b").close()
        return "its own memory opened"
    except PermissionError:
        pass
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    return child.stderr.strip() or ("" if child.returncode == 0 else "the child failed")


def add(a, b):
    return a - b if _reached() else a + b


def mul(a, b):
    return a * b
"""


def test_the_tests_process_memory_has_no_path_to_it(calc_task, tmp_path, evaluator):
    """Graded resolved exactly when every kernel path to the process's memory is refused."""
    task, repo, _ = calc_task
    patch = model_patch(task, repo, tmp_path, {"calc/ops.py": MEMORY_PROBE})
    evaluation = evaluator.evaluate(task, patch, partial=True)
    assert (evaluation.resolved, evaluation.reason) == (True, "resolved"), evaluation.log[-3000:]


def test_the_residue_a_frame_walker_reaches_is_flagged_and_zero_strict(
    calc_task, tmp_path, evaluator
):
    """What the seal leaves open (docs/security.md): the grader's own closure, reached through
    frames. Running the tests cannot tell; the patch's source can, and strict grading gives 0."""
    task, repo, _ = calc_task
    patch = model_patch(task, repo, tmp_path, {"calc/ops.py": CLOSURE_CELL_FORGER})
    lenient = evaluator.evaluate(task, patch, partial=True)
    # Open, and said so: when this starts failing the residue closed; docs/security.md changes.
    assert lenient.reason == "resolved", lenient.log[-2000:]
    assert "frame introspection" in lenient.suspicious_patch
    strict = reward(task, patch, partial=True, evaluator=evaluator, strict=True)
    assert (strict.reward, strict.partial_credit, strict.reason) == (0.0, 0.0, "suspicious_patch")


# --- the other doors ----------------------------------------------------------------------------


def _objects(repo: str) -> list[str]:
    """Every file of the repository's object store (loose objects, packs)."""
    return sorted(str(p) for p in Path(repo, ".git", "objects").rglob("*") if p.is_file())


def test_reward_api_and_task_env(calc_task, patches, graded, evaluator):
    task, repo, _ = calc_task
    before = _objects(repo)
    for name in ROUTES:
        answer = reward(task, patches[name], partial=True, evaluator=evaluator)
        assert (answer.reward, answer.reason) == (0.0, graded[name].reason), name
    with evaluator.env(task) as env:
        env.reset()
        unique = {"calc/notes.py": f"SEEN = {time.time_ns()}\n"}  # objects no grade wrote yet
        for path, text in {**ROUTES["exit_forgery"][0], **unique}.items():
            assert env.step("create", {"path": path, "file_text": text}).error is None
        outcome = env.close()
    assert (outcome.reward, outcome.verdict.reason) == (0.0, "forged_result")
    # Episodes and grades write their trees into a scratch object store, never the source's.
    assert _objects(repo) == before


def test_reward_service_binary_and_partial(calc_task, patches, graded, evaluator):
    task, _, _ = calc_task
    service = RewardService(evaluator, {task.instance_id: task}, workers=2)
    server = serve(service, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = RewardClient(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        for name in ROUTES:
            for partial in (False, True):
                said = client.score(task.instance_id, patches[name], partial=partial)
                assert (said["reward"], said["reason"]) == (0.0, graded[name].reason), name
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "route",
    [
        "dist_info_plugin",
        "exit_forgery",
        "skip_from_source",
        "org_namespace",
        "wrap_call_and_report",
    ],
)
def test_evaluate_command_reports_the_route_unresolved(calc_task, patches, graded, tmp_path, route):
    """SWE-bench's predictions format holds one prediction per instance: one file per route."""
    task, _, work = calc_task
    row = {
        "instance_id": task.instance_id,
        "model_name_or_path": route,
        "model_patch": patches[route],
    }
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(json.dumps(row) + "\n")
    done = run_cli("evaluate", "--tasks", "validate", "--predictions", str(predictions),
                   "--output", str(tmp_path / "eval"), cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (path,) = (tmp_path / "eval").rglob("evaluation.json")
    record = json.loads(path.read_text())
    assert (record["resolved"], record["reward"]) == (False, 0.0)
    assert record["reason"] == graded[route].reason
    (report,) = (tmp_path / "eval").rglob("report.json")
    assert json.loads(report.read_text())[task.instance_id]["resolved"] is False


def _forger(files: dict[str, str]):
    """A scripted agent that writes ``files`` and submits."""
    steps = [tool_call("create", path=p, file_text=t) for p, t in files.items()]
    steps.append(tool_call("submit"))

    def answer(request):
        return {"content": "Next.", "tool_calls": [steps[min(turn(request), len(steps) - 1)]]}

    return answer


FIX_WITH_FORGER = {**FIX, **ROUTES["channel_prewrite"][0]}


@pytest.mark.parametrize("route", ["dist_info_plugin", "fix_with_forger"])
def test_a_forged_rollout_earns_nothing_and_is_not_exported(calc_task, route):
    """Through rollout -> curate (near misses on) -> export: no reward, no soft signal for a
    forged run (the fix's lines are touched, so soft verification alone would keep it)."""
    _, _, work = calc_task
    files = FIX_WITH_FORGER if route == "fix_with_forger" else ROUTES[route][0]
    out = f"rollout-{route}"
    with ScriptedLLM(_forger(files)) as llm:
        for args in (
            ("rollout", "--input", "describe", "--output", out,
             "--base-url", llm.base_url, "--model", "forger"),
            ("curate", "--input", out, "--output", f"curate-{route}"),
            ("export", "--input", f"curate-{route}", "--output", f"dataset-{route}"),
        ):  # fmt: skip
            done = run_cli(*args, cwd=work)
            assert done.returncode == 0, done.stderr
    (row,) = pl.read_parquet(work / out / "trajectories/*.parquet").to_dicts()
    assert row["exit_status"] == "submitted"
    assert (row["resolved"], row["reward"]) == (False, 0.0)
    if route == "fix_with_forger":
        assert (row["soft_reward"], row["f2p_pass_rate"]) == (None, 0.0)
    assert not list(Path(work / f"dataset-{route}").rglob("sft/*.parquet"))


def test_podman_grades_as_docker_does(calc_task, patches, graded, podman_engine):
    """The same image in podman's store (``docker save | podman load``), the same verdicts."""
    task, repo, _ = calc_task
    save = subprocess.Popen(["docker", "save", task.image_name], stdout=subprocess.PIPE)
    loaded = subprocess.run(["podman", "load", "--quiet"], stdin=save.stdout, capture_output=True)
    assert save.wait() == 0 and loaded.returncode == 0, loaded.stderr
    sandbox = PodmanSandbox(Limits(memory="1g", cpus=1.0, pids=256))
    try:
        for name in ("fix", "exit_forgery", "channel_prewrite", "reach_outside_repo"):
            verdict = verify_patch(sandbox, task, repo, patches[name], 60, None)
            assert verdict.reason == graded[name].reason, (name, verdict.log[-2000:])
    finally:
        sandbox.close()
        subprocess.run(["podman", "rmi", "-f", task.image_name], capture_output=True)


# --- the verdict from a run's evidence (no container) -------------------------------------------


def _run(exit_code: int, records: list[dict], timed_out: bool = False, finish: bool = True):
    lines = [json.dumps(r) for r in records] + ([json.dumps({"t": "finish"})] if finish else [])
    evidence = read_channel("\n".join(lines))
    return SupervisedRun(exit_code, timed_out, False, evidence, "", 1.0)


def _report(test_id: str, outcome: str = "passed", when: str = "call", xfail: bool = False):
    record = {"t": "report", "id": test_id, "when": when, "outcome": outcome, "xfail": xfail}
    return {**record, "sub": False}


SENTINELS = (
    Sentinel("tests/test_ops.py::test_mul_value", "PASSED", ""),
    Sentinel("tests/test_ops.py::test_add_order", "FAILED", ""),
)
HONEST = [_report(F2P), _report(P2P), _report(SENTINELS[0].test_id),
          _report(SENTINELS[1].test_id, "failed")]  # fmt: skip


def test_judge_reads_the_channel_and_the_sentinels():
    graded = (F2P, P2P)
    assert judge(_run(1, HONEST), graded, SENTINELS).reason == "resolved"
    # Every outcome bent to "passed": the failing sentinel passed too.
    bent = [_report(r["id"]) for r in HONEST]
    assert judge(_run(0, bent), graded, SENTINELS).reason == "forged_result"
    # Exit 0 over a reported failure; a second word on a test; a word after the session ended.
    assert judge(_run(0, HONEST), graded, SENTINELS).reason == "forged_result"
    twice = [*HONEST, _report(F2P)]
    assert judge(_run(1, twice), graded, SENTINELS).reason == "forged_result"
    late = _run(1, HONEST)
    after = read_channel("\n".join(json.dumps(r) for r in [*HONEST, {"t": "finish"}, HONEST[0]]))
    assert after.tampering and late.evidence.finished
    assert judge(_run(0, bent), graded, SENTINELS).trusted is False
    assert read_channel(json.dumps(HONEST[0]) + "\nnot a record\n").tampering
    # A skipped, xfailed or missing graded test is not passed; a crash is not a verdict.
    skipped, xfailed = _report(F2P, "skipped"), _report(F2P, "skipped", xfail=True)
    xpassed = _report(F2P, xfail=True)
    for records in (
        [skipped, *HONEST[1:]],
        [xfailed, *HONEST[1:]],
        [xpassed, *HONEST[1:]],
        HONEST[1:],
    ):
        assert judge(_run(1, records), graded, SENTINELS).reason == "tests_failed"
    assert judge(_run(139, HONEST), graded, SENTINELS).reason == "suite_failed"
    assert judge(_run(1, HONEST, finish=False), graded, SENTINELS).reason == "suite_failed"
    assert judge(_run(1, HONEST, timed_out=True), graded, SENTINELS).reason == "timed_out"
    assert judge(_run(2, []), graded, SENTINELS).reason == "suite_did_not_run"


def test_subtests_and_reruns_repeat_without_tampering_and_only_fail():
    """unittest's subTest and pytest-rerunfailures send more than one report per phase."""
    graded = (F2P, P2P)
    sub = {**_report(F2P), "sub": True}
    rerun = _report(P2P, "rerun")
    records = [rerun, rerun, sub, sub, *HONEST]
    assert judge(_run(1, records), graded, SENTINELS).reason == "resolved"
    failing = [*records, {**sub, "outcome": "failed"}]
    verdict = judge(_run(1, failing), graded, SENTINELS)
    assert (verdict.reason, verdict.test_report[F2P]) == ("tests_failed", "FAILED")


def test_sentinels_are_new_ordinary_tests_with_both_outcomes():
    source = b"from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    planted, made = sentinels.plant({"tests/test_ops.py": source})
    assert {s.expected for s in made} == {"PASSED", "FAILED"}
    text = planted["tests/test_ops.py"].decode()
    assert text.startswith(source.decode()) and "trajforge" not in text and "sentinel" not in text
    namespace: dict = {}
    exec(compile(text.replace("from calc.ops import add\n", ""), "t", "exec"), namespace)
    for sentinel in made:
        function = namespace[sentinel.test_id.split("::")[1]]
        try:
            function()
            outcome = "PASSED"
        except AssertionError:
            outcome = "FAILED"
        assert outcome == sentinel.expected
    again = sentinels.plant({"tests/test_ops.py": source})[1]
    assert {s.test_id for s in again} != {s.test_id for s in made}  # new every run


def test_twins_copy_a_graded_test_and_must_go_as_it_goes():
    """A twin is the graded test under a new name: a patch right only for the graded id (or a
    report bent by id) leaves the twin failing where the original passed."""
    source = b"from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    planted, made = sentinels.plant({"tests/test_ops.py": source}, (F2P,))
    (twin,) = [s for s in made if s.expected.startswith(sentinels.SAME)]
    assert twin.expected == sentinels.SAME + F2P == rules.SAME + F2P
    name = twin.test_id.split("::")[1]
    assert f"def {name}():\n    assert add(2, 3) == 5\n" in planted["tests/test_ops.py"].decode()
    others = [s for s in made if s is not twin]
    honest = [_report(F2P), _report(P2P), _report(twin.test_id)] + [
        _report(s.test_id, "passed" if s.expected == "PASSED" else "failed") for s in others
    ]
    assert judge(_run(1, honest), (F2P, P2P), made).reason == "resolved"
    by_id = [_report(twin.test_id, "failed") if r["id"] == twin.test_id else r for r in honest]
    assert judge(_run(1, by_id), (F2P, P2P), made).reason == "forged_result"
    # Both failing is an honest wrong patch, not a forgery.
    both = [_report(r["id"], "failed") if r["id"] in (F2P, twin.test_id) else r for r in honest]
    assert judge(_run(1, both), (F2P, P2P), made).reason == "tests_failed"
    # A test that asks for a fixture, or lives in a class, is not copied (its name may matter).
    fixture = b"def test_add(tmp_path):\n    assert tmp_path\n"
    assert not [
        s
        for s in sentinels.plant({"tests/test_ops.py": fixture}, (F2P,))[1]
        if s.expected.startswith(sentinels.SAME)
    ]
    params = b"import pytest\n\n@pytest.mark.parametrize('a', [1, 2])\ndef test_add(a):\n    pass\n"
    made = sentinels.plant({"tests/test_ops.py": params}, (F2P + "[1]",))[1]
    (twin,) = [s for s in made if s.expected.startswith(sentinels.SAME)]
    assert twin.test_id.endswith("[1]") and "@pytest.mark.parametrize('a', [1, 2])" in twin.source


def test_no_sentinel_takes_the_name_of_a_test_a_class_inherits():
    """cachetools' LFUCacheTest inherits ``test_clear_getsizeof`` from a mixin in another file.
    A sentinel drawn as ``def test_clear_getsizeof()`` in tests/test_lfu.py made the seal read
    that inherited test as one that "does not run its file's code": a real fix was
    ``forged_result`` in about one grading in twenty. The graded ids' names are never drawn."""
    source = b"class LFUCacheTest(CacheTestMixin):\n    def test_lfu_tie(self):\n        pass\n"
    path = "tests/test_lfu.py"
    pairs = [f"test_{a}_{b}" for a in ("lfu", "tie") for b in ("lfu", "tie")]
    inherited = tuple(f"{path}::LFUCacheTest::{name}" for name in (*pairs, "test_lfu", "test_tie"))
    held = {test_id.rsplit("::", 1)[1] for test_id in inherited}
    drawn = set()
    for _ in range(300):
        made = sentinels.plant({path: source}, (f"{path}::LFUCacheTest::test_lfu_tie",), inherited)
        drawn |= {s.test_id.split("::")[1] for s in made[1]}
    assert drawn and not drawn & held
    # the same draws without the graded ids take those names (what the grader did before)
    unaware = {
        s.test_id.split("::")[1] for _ in range(300) for s in sentinels.plant({path: source})[1]
    }
    assert unaware & held


def test_a_new_top_level_module_is_allowed_only_where_the_tree_has_that_name():
    tree = ["calc/__init__.py", "calc/ops.py", "tests/test_ops.py", "src/pkg/__init__.py", "x.md"]
    names = patch_policy.top_level_names(
        tree, patch_policy.import_dirs(["tests/test_ops.py"], tree)
    )
    refused = {
        path: patch_policy.new_top_level_module(path, names)
        for path in ("org/__init__.py", "org/python/core.py", "msvcrt.py", "tests/helper.py",
                     "src/org/__init__.py", "pytest.py", "calc_rt.cpython-311-x86_64-linux-gnu.so")
    }  # fmt: skip
    assert all(refused.values()), refused
    assert "org" in str(refused["org/__init__.py"]) and "repository root" in str(
        refused["org/__init__.py"]
    )
    allowed = ("calc/new.py", "calc/sub/__init__.py", "src/pkg/more.py", "NOTES.md", "changes.d/1")
    assert not [p for p in allowed if patch_policy.new_top_level_module(p, names)]


def test_the_seal_speaks_on_the_channel():
    records = [*HONEST, {"t": "tamper", "why": "tracing (sys.settrace)"}]
    evidence = read_channel("\n".join(json.dumps(r) for r in [*records, {"t": "finish"}]))
    assert evidence.tampering == ("the seal: tracing (sys.settrace)",)
    assert judge(_run(1, records), (F2P, P2P), SENTINELS).reason == "forged_result"


DJANGO_TESTS = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
# The package rewrites its own graded ``tests.py`` (no test_ name, not under tests/) before pytest
# reads it: the grader's list keeps it read-only, whatever its name.
REWRITE_TESTS_ON_DISK = """\
import os

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests.py")
try:
    _text = open(_path).read()
    with open(_path, "w") as _handle:
        _handle.write(_text.replace("assert ", "assert True or "))
except OSError:
    pass
"""


def test_a_django_layout_graded_file_is_read_only_by_the_list(calc_task, tmp_path, evaluator):
    """calc/tests.py (Django's layout) graded: the fix resolves; rewriting it from source fails."""
    import dataclasses

    task, repo, _ = calc_task
    clone = tmp_path / "django"
    subprocess.run(["git", "clone", "-q", repo, str(clone)], check=True)
    builder = RepoBuilder(clone)
    builder.git("checkout", "-q", task.base_commit)
    base = builder.commit("Django-style tests", {"calc/tests.py": DJANGO_TESTS})
    django = dataclasses.replace(
        task, source=str(clone), base_commit=base, bug_patch="", test_patch="",
        FAIL_TO_PASS=("calc/tests.py::test_add",), PASS_TO_PASS=(),
    )  # fmt: skip
    (tmp_path / "fix").mkdir()
    (tmp_path / "forger").mkdir()
    fix = model_patch(django, str(clone), tmp_path / "fix", FIX)
    rewrite = {**NOISE, "calc/__init__.py": REWRITE_TESTS_ON_DISK}
    forger = model_patch(django, str(clone), tmp_path / "forger", rewrite)
    assert evaluator.evaluate(django, fix).reason == "resolved"
    forged = evaluator.evaluate(django, forger)
    assert (forged.resolved, forged.reason) == (False, "tests_failed"), forged.log[-2000:]


# A plugin installed in the image that runs the project's code before any conftest, as
# pytest-django's hook does (it imports the settings module, django.setup() the apps): the
# patch's module-level code then runs before pytest's first hook ends.
EARLY_PLUGIN = """\
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config):
    import calc  # noqa: F401  (the project's package: its __init__ runs here)
"""
# pytest's own Function.runtest, rebound so that a failed assert is swallowed in every test
# whose code is test_add's: the graded test and its twins (copies under other names) pass
# alike, the other sentinels still fail, so only the seal's machinery check can tell.
SWALLOW_ADD = """\
import _pytest.python

_real = _pytest.python.Function.runtest


def _runtest(self):
    try:
        _real(self)
    except AssertionError:
        add = getattr(getattr(self, "module", None), "test_add", None)
        code = getattr(getattr(self, "obj", None), "__code__", None)
        if add is None or code is None or code.co_code != add.__code__.co_code:
            raise


_pytest.python.Function.runtest = _runtest
"""
EARLY_IMAGE = """\
FROM {image}
COPY . /early/
RUN P=/venv/bin/python; [ -x "$P" ] || P=/usr/bin/python3; \\
    site=$("$P" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \\
    cp /early/early_plugin.py "$site/" && mkdir "$site/early_plugin-1.0.dist-info" && \\
    cp /early/METADATA /early/entry_points.txt "$site/early_plugin-1.0.dist-info/"
"""


def test_code_a_plugin_runs_before_any_conftest_cannot_rebind_pytest(
    calc_task, tmp_path, evaluator
):
    """The seal fixes pytest's machinery as ``pytest_load_initial_conftests`` begins, not where
    the reporter's own implementation runs: a plugin's implementation that imports the project
    first no longer lets the patch's rebinding of ``Function.runtest`` become the fixed state
    (with the seal fixed at the reporter's implementation this forger, no fix in it, was graded
    resolved). The fix alone, under the same plugin, still resolves: pytest's own patches
    (legacypath's, made inside the hook) are told apart."""
    import dataclasses

    task, repo, _ = calc_task
    context = tmp_path / "context"
    context.mkdir()
    (context / "early_plugin.py").write_text(EARLY_PLUGIN)
    (context / "METADATA").write_text("Metadata-Version: 2.1\nName: early-plugin\nVersion: 1.0\n")
    (context / "entry_points.txt").write_text("[pytest11]\nearly = early_plugin\n")
    (context / "Dockerfile").write_text(EARLY_IMAGE.format(image=task.image_name))
    tag = f"trajforge-test-early-plugin:{tmp_path.name.lower()[-20:]}"
    built = subprocess.run(["docker", "build", "-q", "-t", tag, str(context)],
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    try:
        inspect = ["docker", "image", "inspect", "--format", "{{.Id}}", tag]
        digest = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout
        early = dataclasses.replace(task, image_name=tag, image_digest=digest.strip())
        forger = {**NOISE, "calc/__init__.py": SWALLOW_ADD}
        for name, files in (("fix", FIX), ("forger", forger)):
            (tmp_path / name).mkdir()
            patch = model_patch(early, repo, tmp_path / name, files)
            evaluation = evaluator.evaluate(early, patch)
            want = "resolved" if name == "fix" else "forged_result"
            assert evaluation.reason == want, (name, evaluation.log[-2000:])
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)
