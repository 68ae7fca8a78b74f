"""The dataset card (README.md) of an export, generated from the run, never written by hand.

The YAML front matter is what the Hub and ``datasets.load_dataset(DIR, CONFIG)`` read: ``configs``
maps each config's splits to its Parquet shards, ``dataset_info`` gives features and split sizes
(built with ``datasets``' and ``huggingface_hub``'s own classes, so the format is theirs). The body
says what is in the release, where it came from and how every column was made.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
from datasets import DatasetInfo, Features, SplitDict, SplitInfo
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCardData
from trajforge.filters.explore_scores import EXPLORE_SCORE, EXPLORE_SCORE_RANGES
from trajforge.filters.task_scores import TASK_SCORE_RANGES
from trajforge.filters.trajectory_scores import TRAJECTORY_SCORE_RANGES

_LOW, _HIGH = EXPLORE_SCORE_RANGES[EXPLORE_SCORE]
TAGS = ["code", "software-engineering", "agents", "swe-bench", "tool-use", "trajforge"]
CONFIG_DOCS = {
    "tasks": "verified task instances (SWE-bench fields), one row per task",
    "sft": "resolved agent trajectories as TRL conversational rows with OpenAI tool calls",
    "sft_xml": "the same trajectories in SWE-smith's text function-call format",
    "rl": "prompts plus everything a reward function needs to run the tests",
    "explore": "tasks built backward from explorations: an instruction, the actions that "
    "accomplish it and the end state a replay must reproduce, one row per task",
    "transitions": "one row per step of every run curate kept: state before, action, "
    "observation (world-model data)",
}
COLUMN_DOCS: dict[str, dict[str, str]] = {
    "tasks": {
        "instance_id": "content hash of the task, stable across reruns",
        "repo, base_commit": "the repository and the commit the task starts from",
        "patch": "the gold fix (non-test files) whose tests were run to prove the task",
        "test_patch": "the test files that grade the task, applied before grading",
        "bug_patch": "for injected bugs (`origin` bug/*): applied on base_commit to get the "
        "broken code (SWE-smith's bug branch); empty for mined commits",
        "problem_statement": "the issue text (written by an LLM or a template; see provenance)",
        "FAIL_TO_PASS, PASS_TO_PASS": "tests that fail before and pass after the patch, and "
        "tests that pass both times; proven in a container, rerun, flaky tests removed",
        "flaky_tests": "tests whose status changed between identical runs (never graded)",
        "image_name, test_cmd": "the container image (one per environment profile) and the "
        "command that runs the tests",
        "language, test_runner": "the repository's language (python, javascript: JS and "
        "TypeScript) and the runner whose report test_cmd writes (pytest, jest, vitest, mocha...); "
        "test ids are pytest node ids for python, `file > describe > title` for javascript",
        "excluded_tests": "test modules that cannot be collected in this environment, with the "
        "error (`path: error`); test_cmd leaves them out with --ignore",
        "image_digest, env_recipe": "the image by content (registry digest once pushed, else "
        "the image id) and its Dockerfile; `environments/<profile_id>/` holds the same recipe",
        "difficulty": "0 easy .. 1 hard, from patch size and the rollouts' solve rate",
        "scores": "one field per score (null when not computed): "
        + ", ".join(f"{n} in [{lo:g}, {hi:g}]" for n, (lo, hi) in TASK_SCORE_RANGES.items()),
        "provenance": "key/value pairs saying which tool or model produced each part",
        "validation": "exit codes and log digests of the runs that proved the task",
        "gold_runs": "the gold patch graded by the same grader as a model's patch, "
        "resolved/total (`1/1`); a task whose gold missed a run was never exported",
    },
    "sft": {
        "messages": "OpenAI chat messages; every message has role, content, tool_calls, "
        "tool_call_id and name (null when absent); tool call arguments are JSON text",
        "tools": "the tool JSON schemas offered to the model, as a JSON string (TRL >= 0.29 "
        "parses it; a JSON string survives Arrow, heterogeneous schema dicts do not)",
        "trajectory_id, instance_id, repo": "the run and the task it solved (join with "
        "`tasks.instance_id`, or with `explore.task_id` for explore runs)",
        "model, origin": "the model that produced the run; rollout, explore or import/<format>",
        "language": "the language of the task the run solved (python, javascript)",
        "resolved, reward, exit_status": "verdict of the final patch in a fresh container: only "
        "resolved runs are exported, and the near misses curate kept (see near_miss)",
        "near_miss": "true for an unresolved run kept for SFT: it submitted a patch touching at "
        "least `curate.near_miss_soft_reward` of the gold patch's touched lines (soft "
        "verification, SERA); false for resolved runs",
        "guidance": "for a guided retry (Agent-RLVR), what its prompt was told after the issue: "
        "the failing tests' output of the attempt before it and the files the gold patch "
        "changes (never their content); empty for an unguided run",
        "scores": "computed at export: "
        + ", ".join(f"{n} in [{lo:g}, {hi:g}]" for n, (lo, hi) in TRAJECTORY_SCORE_RANGES.items()),
    },
    "sft_xml": {
        "messages": "role/content turns: assistant turns hold the thought, a blank line and "
        "`<function=NAME><parameter=P>value</parameter></function>` blocks, tool results are "
        "user turns (`OBSERVATION:` and the output, or SWE-agent's no-output sentence), and the "
        "run ends on the assistant's last turn. For runs imported from SWE-agent (`origin` "
        "import/swe-agent) the text is byte for byte what SWE-smith's converter "
        "(`transform_traj_xml`) writes, except the system turn, which is the run's own where "
        "SWE-smith swaps in its inference prompt; SWE-agent's demonstrations are left out, and "
        "SWE-agent >= 1.1 files are read from `history` where SWE-smith reads the last step's "
        "`query`. Other origins are not SWE-agent's text: raw tool output is put in SWE-agent's "
        "templates, the results of one turn's several calls share one user turn, and a turn "
        "without calls is kept as written (SWE-smith adds a blank line)",
        "trajectory_id, instance_id, repo, model, origin, language, resolved": "as in sft",
        "near_miss": "as in sft",
    },
    "rl": {
        "prompt": "system message (the agent's role and the repository) and user message (the "
        "problem statement); tests are never shown",
        "image_name, image_digest, test_cmd, FAIL_TO_PASS, PASS_TO_PASS": "what a reward "
        "function runs: start "
        "the image, check out repo at base_commit, apply bug_patch, the model's patch and the "
        "task's test_patch, run test_cmd; reward 1 when every FAIL_TO_PASS passes and every "
        "PASS_TO_PASS still passes",
        "repo, base_commit, bug_patch, environment_setup_commit": "where the rollout starts",
        "instance_id, origin, difficulty": "as in tasks",
        "language, test_runner": "as in tasks: a reward function reads test_cmd's report with "
        "test_runner's format",
        "hint": "optional: the guidance a guided retry of the task was given (the failing "
        "tests' output of a failed attempt and the files the gold patch changes), for "
        "guidance-assisted RL; null when no guided retry ran",
    },
    "explore": {
        "task_id": "content hash of the task, stable across reruns; `instance_id` of its run in "
        "sft and transitions",
        "repo, base_commit, image_name": "the repository, the commit the actions start from and "
        "the container image they ran in",
        "instruction": "what the actions accomplish, written after the fact (by an LLM or a "
        "template; see origin and provenance). A template instruction is written from the docs' "
        "prose around a documentation example, the names it uses and the values it passes in, "
        "never its code (the code is the trajectory); any instruction quoting a line of the "
        "trajectory's code or of the output its check holds was dropped",
        "actions": "the replayable tool calls in order: `tool` (bash, view, create, str_replace) "
        "and `arguments` (JSON text)",
        "expected_files": "the check: `{key: path under the repo, value: sha256 of its content "
        "after the actions, or <deleted>}`",
        "expected_outputs": "the check: `{key: action index, value: sha256 of its normalized "
        "output}` for the steps whose output is part of the answer",
        "score": f"the judge's score in [{_LOW:g}, {_HIGH:g}]; curate drops tasks below "
        f"`curate.min_scores.{EXPLORE_SCORE}`",
        "origin": "explore/template or explore/llm: who wrote the instruction",
        "trajectory_id, messages, tools": "the exploration as a run (as in sft; null when curate "
        "kept no run of the task); it passed a replay in a fresh container",
        "provenance": "key/value pairs saying which tool or model produced each part",
    },
    "transitions": {
        "transition_id, trajectory_id, instance_id, repo": "the step, its run, and the task of "
        "the run (a tasks `instance_id` or an explore `task_id`)",
        "step": "0-based position in the run",
        "state": 'JSON of the workspace before the action: `{"changed_files": [...], '
        '"last_exit_code": int or null}`',
        "action": 'JSON `{"tool": name, "arguments": "<the JSON text the model wrote>"}`',
        "observation, exit_code": "what the tool returned, and the shell's exit code (null for "
        "a call the tools refused)",
        "changed_files": "files that differ from the start after the action",
        "origin": "rollout, explore/template, explore/llm or import/<format>",
    },
}


@dataclass(frozen=True)
class SplitFacts:
    num_examples: int
    num_bytes: int  # Arrow (in-memory) bytes, as datasets counts them
    download_size: int  # Parquet bytes on disk
    files: int


@dataclass
class CardFacts:
    """Everything the card says, gathered by the export."""

    name: str
    license: str
    version: str
    trajforge_version: str
    splits: dict[str, dict[str, SplitFacts]]  # config -> split -> facts (non-empty only)
    schemas: dict[str, pa.Schema]
    omitted: dict[str, str]  # config -> why it has no rows
    repo_splits: dict[str, str]
    repo_tasks: Counter
    task_origins: Counter
    trajectory_origins: Counter
    models: Counter
    dropped: Counter
    gates: dict[str, int]  # suite -> expectations passed
    inputs: list[str] = field(default_factory=list)
    environments: int = 0  # recipes under environments/
    near_misses: int = 0  # sft rows of unresolved runs curate kept by soft_reward
    near_miss_low: float | None = None  # the lowest soft_reward among them
    guided_runs: int = 0  # sft rows of guided retries
    task_languages: Counter = field(default_factory=Counter)  # language -> tasks (explore too)


def size_category(rows: int) -> str:
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")]
    bounds += [(1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")]
    for bound, label in bounds:
        if rows < bound:
            return label
    return "10M<n<100M"


def front_matter(facts: CardFacts) -> str:
    largest = max(
        (sum(s.num_examples for s in d.values()) for d in facts.splits.values()), default=0
    )
    card = DatasetCardData(
        license=facts.license,
        pretty_name=facts.name,
        task_categories=["text-generation"],
        size_categories=[size_category(largest)],
        tags=TAGS,
    )
    infos = {}
    configs = {}
    for config, splits in facts.splits.items():
        infos[config] = DatasetInfo(
            features=Features.from_arrow_schema(facts.schemas[config]),
            splits=SplitDict(
                {
                    split: SplitInfo(name=split, num_bytes=s.num_bytes, num_examples=s.num_examples)
                    for split, s in splits.items()
                }
            ),
            download_size=sum(s.download_size for s in splits.values()),
            dataset_size=sum(s.num_bytes for s in splits.values()),
            config_name=config,
        )
        configs[config] = {
            "data_files": [{"split": split, "path": f"{config}/{split}-*"} for split in splits]
        }
    DatasetInfosDict(infos).to_dataset_card_data(card)
    MetadataConfigs(configs).to_dataset_card_data(card)
    return f"---\n{card.to_yaml()}\n---\n"


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _environments_section(count: int) -> list[str]:
    if not count:
        return []
    return [
        "## Environments",
        "",
        f"{count} environment(s), one per install profile. `environments/<profile_id>/` holds the "
        "`Dockerfile` the image was built from and `environment.json` (image, digest, repo, setup "
        "commit); `environments/base/` says how the base image is made. Pull `image_name` "
        "(by `image_digest` where a registry has it) or rebuild: put the repository at the setup "
        "commit under `repo/` of an empty directory, add `trajforge/ca.crt` (a CA bundle, or an "
        "empty file) and `trajforge/env.json`, and run `docker build -f Dockerfile DIR`.",
        "",
    ]


def _soft_verification_section(facts: CardFacts) -> list[str]:
    """How many SFT rows are near misses or guided retries, and why they are there."""
    if not facts.near_misses and not facts.guided_runs:
        return []
    lines = ["## Near misses and guided retries", ""]
    if facts.near_misses:
        low = f" (the lowest: {facts.near_miss_low:g})" if facts.near_miss_low is not None else ""
        lines.append(
            f"- {facts.near_misses} `sft` row(s) are unresolved runs kept as near misses "
            "(`near_miss` true): each submitted a patch that touches at least "
            "`curate.near_miss_soft_reward` of the lines the gold patch touches, on the gold "
            f"patch's files (`scores.soft_reward`{low}), but did not pass every test. Filter "
            "them out with `near_miss == False` to train on verified solutions only."
        )
    if facts.guided_runs:
        lines.append(
            f"- {facts.guided_runs} `sft` row(s) are guided retries: their user turn ends with "
            "a `<guidance>` block (the failing tests' output of an earlier failed attempt and "
            "the files the gold patch changes, never its content); `guidance` holds it."
        )
    return [*lines, ""]


def render_card(facts: CardFacts) -> str:
    """README.md: front matter, contents, loading, provenance, columns, quality."""
    lines = [
        f"# {facts.name}",
        "",
        "Verified training data for software-engineering agents, produced by trajforge: tasks "
        "proven by running their tests in containers, agent trajectories whose final patch was "
        "verified in a fresh container, RL prompts with everything a reward function needs, "
        "explore tasks whose end state was reproduced by a replay, and per-step transitions.",
        "",
        f"- version: `{facts.version}` (content hash of the data files; also in `version.json`)",
        f"- trajforge: {facts.trajforge_version}",
        "",
        "## Configs",
        "",
    ]
    rows: list[list[object]] = []
    for config, splits in facts.splits.items():
        sizes = [splits[s].num_examples if s in splits else 0 for s in ("train", "validation")]
        rows.append([f"`{config}`", CONFIG_DOCS.get(config, ""), *sizes])
    lines += _table(["config", "contents", "train", "validation"], rows)
    if facts.omitted:
        lines += ["", "Omitted (no rows, so not listed in `configs`):", ""]
        lines += [f"- `{c}`: {why}" for c, why in sorted(facts.omitted.items())]
    lines += [
        "",
        "Splits are by repository: a hash of the repository name and the seed decides, so no "
        "repository appears in both `train` and `validation`.",
        "",
        *_environments_section(facts.environments),
        "## Loading",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        *(f'{c} = load_dataset("PATH_OR_REPO", "{c}")' for c in facts.splits),
        "```",
        "",
        "`sft` loads into TRL's `SFTTrainer` as is (conversational `messages` plus `tools`). "
        "`tools` is a JSON string, which TRL >= 0.29 parses; for older TRL versions or other "
        "trainers, `json.loads` it per row. Tool-call `arguments` are JSON text, as OpenAI "
        "writes them.",
        "",
        "## Provenance",
        "",
        f"Inputs: {', '.join(facts.inputs) or '-'}",
        "",
        "Task origins: " + _counts(facts.task_origins),
        "",
        "Tasks per language: " + _counts(facts.task_languages),
        "",
        *_explore_origins(facts.task_origins),
        "Trajectory origins: " + _counts(facts.trajectory_origins),
        "",
        "Models: " + _counts(facts.models),
        "",
    ]
    repo_rows = [[f"`{r}`", facts.repo_splits[r], facts.repo_tasks[r]] for r in facts.repo_splits]
    lines += _table(["repository", "split", "tasks"], sorted(repo_rows))
    lines += ["", "## How each column was made", ""]
    for config in facts.splits:
        lines += [f"### `{config}`", ""]
        lines += [f"- `{cols}`: {doc}" for cols, doc in COLUMN_DOCS.get(config, {}).items()]
        lines.append("")
    lines += _soft_verification_section(facts)
    lines += ["## Quality", ""]
    lines += [
        f"- `{suite}`: {count} great-expectations checks passed"
        for suite, count in sorted(facts.gates.items())
    ]
    lines += ["", "Data Docs: `data_docs/index.html`.", ""]
    if facts.dropped:
        lines += ["Rows left out of the export, by reason: " + _counts(facts.dropped), ""]
    return front_matter(facts) + "\n" + "\n".join(lines)


def _counts(counter: Counter) -> str:
    return ", ".join(f"{key} ({count})" for key, count in sorted(counter.items())) or "-"


def _explore_origins(origins: Counter) -> list[str]:
    """How many explore tasks a template made (no model) and how many a model labeled."""
    explore = {o: n for o, n in origins.items() if o.startswith("explore/")}
    if not explore:
        return []
    template, total = explore.get("explore/template", 0), sum(explore.values())
    return [
        f"Explore tasks: {total}, of which {template} template-made (no model: each runs a "
        "documentation example as written, and its instruction is written from the docs' prose "
        "around the example and the example's inputs, never its code) and "
        f"{total - template} labeled by a model from a recorded exploration.",
        "",
    ]
