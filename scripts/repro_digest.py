"""A digest of every table column a full `dvc repro` writes, to prove a refactor changes no bytes.

Runs the project's dvc.yaml on the tests' calc repository (mined commits, injected bugs with
combinations, describe and rollout with the scripted model, explore) in /tmp/repro-digest, so
paths are the same from run to run, and writes one sha256 per Parquet column and per other file.

    PATH=<dir of the trajforge to test>:$PATH python scripts/repro_digest.py run ROOT OUT.json
    python scripts/repro_digest.py compare BEFORE.json AFTER.json [NOISE_A.json NOISE_B.json]

``compare`` lists the entries that differ, leaving out those that differ between two runs of the
same code (NOISE_A vs NOISE_B: timings, logs, the scripted model's random call ids, summaries).
Data Docs validation pages are named by their time, so they are keyed without it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

WORK = Path("/tmp/repro-digest")
STAMP = re.compile(r"/\d{8}T\d{6}\.\d+Z/")


def load(path: str) -> dict[str, object]:
    with open(path) as f:
        return json.load(f)["digests"]


def compare(before: str, after: str, noise: list[str]) -> int:
    a, b = load(before), load(after)
    noisy: set[str] = set()
    if len(noise) == 2:
        n1, n2 = load(noise[0]), load(noise[1])
        noisy = {k for k in set(n1) | set(n2) if n1.get(k) != n2.get(k)}
    keys = sorted(set(a) | set(b))
    differ = [k for k in keys if a.get(k) != b.get(k) and k not in noisy]
    same = sum(1 for k in keys if a.get(k) == b.get(k))
    print(f"{len(keys)} entries: {same} identical, {len(noisy)} vary between runs of one code")
    for key in differ:
        print(f"DIFFERS {key}")
    return 1 if differ else 0


def params(repo: Path, shas: dict[str, str], base_url: str) -> str:
    mined = ", ".join(shas[name] for name in ("fix_add", "flaky", "import_error", "bad_install"))
    return (
        f"cache_dir: {WORK / 'cache'}\n"
        f"sources:\n  repos: [{repo}]\n  pypi: []\n"
        f"mine:\n  commits: [{mined}]\n"
        f"inject:\n  repos: [{repo}]\n  pypi: []\n  commit: {shas['hang']}\n"
        "  max_candidates: 6\n  combos: 2\n  min_complexity: 1\n"
        "pipeline:\n  runner: local\n"
        "environment:\n  default_python: '3.11'\n"
        "sandbox:\n  kind: docker\n"
        "validate:\n  test_timeout_s: 60\n"
        f"llm:\n  base_url: {base_url}\n  model: scripted\n"
        "describe:\n  attempts: 2\n"
        "rollout:\n  attempts: 1\n  max_steps: 6\n"
        f"explore:\n  repos: [{repo}]\n  pypi: []\n  commit: {shas['hang']}\n"
        "  explorations: 1\n  max_steps: 2\n"
        "curate:\n  threshold: 0.8\n"
        "export:\n  name: calc-tasks\n"
    )


def digests(data: Path) -> dict[str, object]:
    import pyarrow.parquet as pq

    found: dict[str, object] = {}
    for f in sorted(data.rglob("*")):
        if not f.is_file():
            continue
        rel = STAMP.sub("/", str(f.relative_to(data)))
        if f.suffix == ".parquet":
            table = pq.read_table(f)
            for name in table.column_names:
                text = repr(table.column(name).to_pylist()).encode()
                found[f"{rel}:{name}"] = hashlib.sha256(text).hexdigest()[:16]
            found[f"{rel}:#rows"] = table.num_rows
        else:
            found[rel] = hashlib.sha256(f.read_bytes()).hexdigest()[:16]
    return found


def run(root: Path, out: str) -> int:
    sys.path.insert(0, str(root / "tests"))
    from repo_factory import build_calc_repo
    from scripted_agents import reporter_and_fixer
    from scripted_llm import ScriptedLLM

    shutil.rmtree(WORK, ignore_errors=True)
    repo, project = WORK / "calc", WORK / "project"
    shas = build_calc_repo(repo)
    project.mkdir(parents=True)
    shutil.copy(root / "dvc.yaml", project)
    skip = shutil.ignore_patterns("__pycache__")
    for folder in ("pipelines", "generators", "verifiers", "filters", "schemas"):  # dvc.yaml deps
        shutil.copytree(root / folder, project / folder, ignore=skip)
    with ScriptedLLM(reporter_and_fixer) as llm:
        (project / "params.yaml").write_text(params(repo, shas, llm.base_url))
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
        subprocess.run(["dvc", "init", "-q"], cwd=project, check=True)
        proc = subprocess.run(["dvc", "repro"], cwd=project, capture_output=True, text=True)
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    found = digests(project / "data")
    with open(out, "w") as f:
        json.dump({"rc": proc.returncode, "digests": found}, f, indent=1)
    print(f"dvc repro exit {proc.returncode}, {len(found)} entries -> {out}")
    return proc.returncode


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "compare":
        raise SystemExit(compare(sys.argv[2], sys.argv[3], sys.argv[4:]))
    if len(sys.argv) == 4 and sys.argv[1] == "run":
        raise SystemExit(run(Path(sys.argv[2]).resolve(), sys.argv[3]))
    print(__doc__, file=sys.stderr)
    raise SystemExit(2)
