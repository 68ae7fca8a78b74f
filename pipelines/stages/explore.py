"""The ``explore`` stage: repositories -> exploration tasks proven by replay, as a PTransform.

Per repository snapshot: its environment image is detected and built as for validate (the shared
``BuildEnvironments``), its doc examples are found, then runs are recorded in containers of that
image: with an endpoint, ``explore.explorations`` seeded model explorations labeled backward
(prefixes included, the unlabelable ones pruned); without one, each doc example run as written and
labeled from a template written from the prose around the example (an example without prose is
a ``no_prose`` rejection, never run). An instruction that quotes its trajectory's code or the
output its check holds is a ``leaks_code`` / ``leaks_output`` rejection, whoever wrote it. Every
other labeled run is replayed in a fresh container; one whose end state differs is a rejection
with the reason. Kept runs leave as ``explore_tasks``, ``trajectories`` (origin ``explore/*``)
and ``transitions``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass

import apache_beam as beam
from trajforge.generators.explore.backward_labeler import label_prefix, prefix_ends
from trajforge.generators.explore.doc_examples import DocExample, find_examples
from trajforge.generators.explore.instruction_check import instruction_leak
from trajforge.generators.explore.labeled_runs import ExplorationSite, Labeled, explore_records
from trajforge.generators.explore.model_explorer import exploration_prompt, explore
from trajforge.generators.explore.recording import RecordingWorkspace
from trajforge.generators.explore.template_explorer import template_actions, template_instruction
from trajforge.generators.llm.client import LLMClient, endpoint_configured
from trajforge.generators.sources.specs import RepoRef, SourceOptions, open_source
from trajforge.pipelines.runtime import progress
from trajforge.pipelines.runtime.stage_fn import REJECTED, SandboxFn, StageFn
from trajforge.pipelines.stages.environment import BuildEnvironments, Site
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.explore_task import ExploreTask
from trajforge.schemas.params import Params
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.trajectory import Trajectory
from trajforge.schemas.transition import Transition
from trajforge.verifiers.replay import replay
from trajforge.verifiers.sandbox.base import SessionSpec
from trajforge.verifiers.sandbox.git_tree import archive, read_file_at, resolve_commit

STAGE = "explore"
EXIT_MARKER = re.compile(r"\[exit code -?\d+\]")  # what the workspace appends to a failed command
TRAJECTORIES, TRANSITIONS = "trajectories", "transitions"
LabeledRun = tuple[ExploreTask, Trajectory, list[Transition]]  # what a kept run becomes


@dataclass(frozen=True)
class Target:
    """A repository snapshot to explore: the spec it was named by, resolved to a commit."""

    spec: str
    repo: str
    source: str
    commit: str


def _site(target: Target) -> Site:
    return Site(target.spec, target.source, target.commit, target.repo, order=(target.commit,))


class ResolveTargetFn(StageFn):
    """A source spec -> the snapshot to explore (``explore.commit``, else the newest commit)."""

    STAGE = STAGE

    def process(self, spec: str):
        wanted = self.params.explore.commit
        try:
            repo = open_source(spec, SourceOptions.from_params(self.params))
            commit = resolve_commit(repo.path, wanted or "HEAD")
        except UserError as exc:
            yield self.reject_error(spec, exc)
            return
        if commit is None:
            detail = (
                f"{repo.name}: commit {wanted} not found; set explore.commit to an existing SHA"
            )
            yield self.reject(spec, "unknown_commit", detail)
            return
        yield Target(spec, repo.name, repo.source, commit)


class ExploreRepoFn(SandboxFn):
    """(environment, target) -> explore tasks (main), trajectories, transitions, rejections."""

    STAGE = STAGE

    def setup(self) -> None:
        super().setup()
        llm = self.params.llm
        wanted = endpoint_configured(llm)
        self.client = LLMClient(llm, self.params.results_cache) if wanted else None

    def process(self, element: tuple[EnvProfile, Target]):
        built, target = element
        if self.unavailable is not None:
            yield self.reject_unavailable(target.spec)
            return
        try:
            repo = open_source(target.spec, SourceOptions.from_params(self.params))
        except UserError as exc:
            yield self.reject_error(target.spec, exc)
            return
        examples = find_examples(repo.path, target.commit, self.params.explore.max_examples)
        where = ExplorationSite(
            target.repo, target.source, target.commit, built.image, built.profile_id,
            image_digest=built.image_digest, env_recipe=built.recipe,
        )  # fmt: skip
        start = archive(repo.path, target.commit, prefix="repo/")
        runs = (
            self._model_runs(where, repo, examples, start)
            if self.client
            else (self._template_runs(where, examples, start))
        )
        for item in runs:
            if isinstance(item, Rejection):
                yield self.rejection(item)
                continue
            yield from self._verified(where, start, item)

    def _template_runs(
        self, where: ExplorationSite, examples: list[DocExample], start: bytes
    ) -> Iterator[LabeledRun | Rejection]:
        """Each doc example as written; one that ends in an error teaches nothing and is dropped,
        and one without prose to write its instruction from is not run."""
        for index, example in enumerate(examples):
            name = f"{where.repo}@{where.commit[:12]}:{example.source}"
            instruction = template_instruction(example, index)
            if instruction is None:
                detail = f"{name}: no prose around the example to write an instruction from"
                yield Rejection(name, STAGE, "no_prose", detail)
                continue
            actions = template_actions(example, index)
            recorded = self._record(
                where, start, lambda ws, todo=actions: [ws.run(a.tool, a.arguments) for a in todo]
            )
            if len(recorded.actions) < len(actions):
                yield Rejection(name, STAGE, "example_timed_out", f"{name}: a step timed out")
                continue
            failed = next((o for o in recorded.outcomes if o.exit_code != 0), None)
            if failed is not None:
                detail = f"{name}: {_last_error_line(failed.observation)[:200]}"
                yield Rejection(name, STAGE, "example_fails", detail)
                continue
            observations = [o.observation for o in recorded.outcomes]
            expected = example.expected.strip()
            matches = bool(expected) and expected in observations[-1]
            label = Labeled(
                instruction,
                score=5.0 if matches else 4.0 if observations[-1].strip() else 3.0,
                origin="explore/template",
                model="template",
                provenance={
                    "labeler": "template",
                    "example": example.source,
                    "note": "no endpoint configured (llm.base_url): doc examples run as written, "
                    "instructions written from the prose around them",
                },
            )
            yield explore_records(
                where, recorded.actions, recorded.outcomes, recorded.states[-1], label
            )

    def _model_runs(
        self, where: ExplorationSite, repo: RepoRef, examples: list[DocExample], start: bytes
    ) -> Iterator[LabeledRun | Rejection]:
        assert self.client is not None
        client, params = self.client, self.params.explore
        readme = _readme(repo.path, where.commit)
        for seed in range(params.explorations):
            prompt = exploration_prompt(where.repo, readme, examples, seed)
            recorded = self._record(
                where, start, lambda ws, s=seed, p=prompt: explore(client, ws, p, params, s)
            )
            name = f"{where.repo}@{where.commit[:12]}#explore{seed}"
            if not recorded.actions:
                yield Rejection(name, STAGE, "nothing_recorded", f"{name}: no replayable step")
                continue
            for end in prefix_ends(recorded.outcomes, params.max_labels):
                actions, outcomes = recorded.actions[: end + 1], recorded.outcomes[: end + 1]
                label = label_prefix(client, where.repo, actions, outcomes)
                if label.instruction is None:
                    self.count("pruned")
                    detail = f"{name}: prefix of {end + 1} steps has no instruction"
                    yield Rejection(f"{name}:{end}", STAGE, f"pruned_{label.reason}", detail)
                    continue
                provenance = {"labeler": f"llm:{client.model}", "seed": str(seed)}
                labeled = Labeled(
                    label.instruction, label.score, "explore/llm", client.model, provenance
                )
                yield explore_records(where, actions, outcomes, recorded.states[end], labeled)

    def _record(self, where: ExplorationSite, start: bytes, act) -> RecordingWorkspace:
        assert self.sandbox is not None
        ex = self.params.explore
        with self.sandbox.session(SessionSpec(where.image)) as session:
            session.put_archive(start, "/")
            workspace = RecordingWorkspace(session, ex.command_timeout_s, ex.max_observation_chars)
            workspace.open()
            act(workspace)
        return workspace

    def _verified(self, where: ExplorationSite, start: bytes, labeled: LabeledRun):
        task, trajectory, transitions = labeled
        name = f"{where.repo}@{where.commit[:12]}:{task.task_id}"
        if not task.expected_files and not task.expected_outputs:
            yield self.reject(name, "empty_check", f"{name}: the run leaves nothing to check")
            return
        observations = [m.content or "" for m in trajectory.messages if m.role == "tool"]
        leak = instruction_leak(task.instruction, task.actions, observations, task.expected_outputs)
        if leak is not None:
            yield self.reject(name, leak[0], f"{name}: the instruction quotes {leak[1][:200]!r}")
            return
        assert self.sandbox is not None
        ex = self.params.explore
        verdict = replay(
            self.sandbox, where.image, start, task, ex.command_timeout_s, ex.max_observation_chars
        )
        if not verdict.ok:
            yield self.reject(
                name, verdict.reason, f"{name}: {'; '.join(verdict.mismatches)[:300]}"
            )
            return
        self.count("kept")
        progress.tick("replayed")
        yield task
        yield beam.pvalue.TaggedOutput(
            TRAJECTORIES, dataclasses.replace(trajectory, resolved=True, reward=task.score)
        )
        for transition in transitions:
            yield beam.pvalue.TaggedOutput(TRANSITIONS, transition)


def _last_error_line(observation: str) -> str:
    """The last line the command printed (the exception, usually), not the exit-code marker."""
    lines = [line for line in observation.strip().splitlines() if line.strip()]
    while lines and EXIT_MARKER.fullmatch(lines[-1].strip()):
        lines.pop()
    return lines[-1].strip() if lines else "no output"


def _readme(repo_path: str, commit: str) -> str:
    for name in ("README.md", "README.rst", "README.txt", "README"):
        try:
            return read_file_at(repo_path, commit, name)
        except Exception:  # absent at this commit: try the next name
            continue
    return ""


class ExploreRepos(beam.PTransform):
    """Source specs -> {"explore_tasks", "trajectories", "transitions", "rejections"}."""

    def __init__(self, params: Params) -> None:
        super().__init__()
        self.params = params

    def expand(self, specs):
        targets = (
            specs
            | "Spread" >> beam.Reshuffle()
            | "ResolveTarget"
            >> beam.ParDo(ResolveTargetFn(self.params)).with_outputs(REJECTED, main="targets")
        )
        envs = targets.targets | "Environments" >> BuildEnvironments(self.params, STAGE, _site)
        explored = envs["ready"] | "ExploreRepo" >> beam.ParDo(
            ExploreRepoFn(self.params)
        ).with_outputs(REJECTED, TRAJECTORIES, TRANSITIONS, main="explore_tasks")
        rejections = (
            targets[REJECTED],
            envs["rejections"],
            explored[REJECTED],
        ) | "AllRejections" >> beam.Flatten()
        return {
            "explore_tasks": explored.explore_tasks,
            "trajectories": explored[TRAJECTORIES],
            "transitions": explored[TRANSITIONS],
            "rejections": rejections,
        }
