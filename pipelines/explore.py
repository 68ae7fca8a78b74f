"""The ``explore`` stage: repositories -> exploration tasks proven by replay, as a PTransform.

Per repository snapshot: its environment image is detected and built as for validate, its doc
examples are found, then runs are recorded in containers of that image: with an endpoint,
``explore.explorations`` seeded model explorations labeled backward (prefixes included, the
unlabelable ones pruned); without one, each doc example run as written and labeled from a
template. Every labeled run is replayed in a fresh container; one whose end state differs is a
rejection with the reason. Kept runs leave as ``explore_tasks``, ``trajectories`` (origin
``explore/*``) and ``transitions``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from generators.backward_labeler import label_prefix, prefix_ends
from generators.doc_examples import DocExample, find_examples
from generators.env_image import build_env_image
from generators.env_profile import detect_profile
from generators.exploration_record import RecordingWorkspace
from generators.explore_records import Labeled, Snapshot, explore_records
from generators.explorer import exploration_prompt, explore
from generators.git import archive, read_file_at, resolve_commit
from generators.llm_client import LLMClient, endpoint_configured
from generators.sources import RepoRef, open_source
from generators.template_explorer import template_actions, template_instruction
from pipelines import progress
from pipelines.mine import source_options
from pipelines.validate import SandboxFn
from schemas.errors import UserError
from schemas.explore_task import ExploreTask
from schemas.params import Params
from schemas.rejection import Rejection
from schemas.trajectory import Trajectory
from schemas.transition import Transition
from verifiers.replay import replay
from verifiers.sandbox import SessionSpec

STAGE = "explore"
REJECTED, TRAJECTORIES, TRANSITIONS = "rejected", "trajectories", "transitions"
Candidate = tuple[ExploreTask, Trajectory, list[Transition]]


class ExploreRepoFn(SandboxFn):
    """A source spec -> explore tasks (main), trajectories, transitions, rejections."""

    def setup(self) -> None:
        super().setup()
        llm = self.params.llm
        self.client = LLMClient(llm, self.params.cache_dir) if endpoint_configured(llm) else None

    def process(self, spec: str):
        try:
            where, repo, examples, start = self._prepare(spec)
        except UserError as exc:
            yield _reject(spec, exc.reason, str(exc))
            return
        runs = (
            self._model_runs(where, repo, examples, start)
            if self.client
            else (self._template_runs(where, examples, start))
        )
        for item in runs:
            if isinstance(item, Rejection):
                yield _reject(item.input, item.reason, item.detail)
                continue
            yield from self._verified(where, start, item)

    def _prepare(self, spec: str) -> tuple[Snapshot, RepoRef, list[DocExample], bytes]:
        if self.unavailable is not None:
            raise self.unavailable
        assert self.sandbox is not None
        params = self.params
        repo = open_source(spec, source_options(params))
        commit = resolve_commit(repo.path, params.explore.commit or "HEAD")
        if commit is None:
            raise UserError(
                f"{repo.name}: commit {params.explore.commit} not found; set explore.commit to "
                "an existing SHA",
                reason="unknown_commit",
            )
        profile = detect_profile(
            repo.path, commit, repo.name,
            default_python=params.environment.default_python,
            pythons=tuple(params.environment.pythons),
        )  # fmt: skip
        logs = os.path.join(params.cache_dir, "build-logs")
        built = build_env_image(self.sandbox, profile, repo.path, params.environment, logs)
        if built.status != "built":
            tail = "\n".join(built.log.strip().splitlines()[-10:])
            raise UserError(f"{repo.name}: installing the environment failed\n{tail}",
                            reason="install_failed")  # fmt: skip
        examples = find_examples(repo.path, commit, params.explore.max_examples)
        where = Snapshot(repo.name, repo.source, commit, built.image, built.profile_id)
        return where, repo, examples, archive(repo.path, commit, prefix="repo/")

    def _template_runs(
        self, where: Snapshot, examples: list[DocExample], start: bytes
    ) -> Iterator[Candidate | Rejection]:
        """Each doc example as written; one that ends in an error teaches nothing and is dropped."""
        for index, example in enumerate(examples):
            actions = template_actions(example, index)
            recorded = self._record(
                where, start, lambda ws, todo=actions: [ws.run(a.tool, a.arguments) for a in todo]
            )
            name = f"{where.repo}@{where.commit[:12]}:{example.source}"
            if len(recorded.actions) < len(actions):
                yield Rejection(name, STAGE, "example_timed_out", f"{name}: a step timed out")
                continue
            if any(o.exit_code != 0 for o in recorded.outcomes):
                tail = recorded.outcomes[-1].observation.strip().splitlines()[-1:] or [""]
                yield Rejection(name, STAGE, "example_fails", f"{name}: {tail[0][:200]}")
                continue
            observations = [o.observation for o in recorded.outcomes]
            expected = example.expected.strip()
            matches = bool(expected) and expected in observations[-1]
            label = Labeled(
                template_instruction(example, observations),
                score=5.0 if matches else 4.0 if observations[-1].strip() else 3.0,
                origin="explore/template",
                model="template",
                provenance={
                    "labeler": "template",
                    "example": example.source,
                    "note": "no endpoint configured (llm.base_url): doc examples run as written",
                },
            )
            yield explore_records(
                where, recorded.actions, recorded.outcomes, recorded.states[-1], label
            )

    def _model_runs(
        self, where: Snapshot, repo: RepoRef, examples: list[DocExample], start: bytes
    ) -> Iterator[Candidate | Rejection]:
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
                    Metrics.counter(STAGE, "pruned").inc()
                    detail = f"{name}: prefix of {end + 1} steps has no instruction"
                    yield Rejection(f"{name}:{end}", STAGE, f"pruned_{label.reason}", detail)
                    continue
                provenance = {"labeler": f"llm:{client.model}", "seed": str(seed)}
                labeled = Labeled(
                    label.instruction, label.score, "explore/llm", client.model, provenance
                )
                yield explore_records(where, actions, outcomes, recorded.states[end], labeled)

    def _record(self, where: Snapshot, start: bytes, act) -> RecordingWorkspace:
        assert self.sandbox is not None
        ex = self.params.explore
        with self.sandbox.session(SessionSpec(where.image)) as session:
            session.put_archive(start, "/")
            workspace = RecordingWorkspace(session, ex.command_timeout_s, ex.max_observation_chars)
            workspace.open()
            act(workspace)
        return workspace

    def _verified(self, where: Snapshot, start: bytes, candidate: Candidate):
        task, trajectory, transitions = candidate
        name = f"{where.repo}@{where.commit[:12]}:{task.task_id}"
        if not task.expected_files and not task.expected_outputs:
            yield _reject(name, "empty_check", f"{name}: the run leaves nothing to check")
            return
        assert self.sandbox is not None
        ex = self.params.explore
        verdict = replay(
            self.sandbox, where.image, start, task, ex.command_timeout_s, ex.max_observation_chars
        )
        if not verdict.ok:
            yield _reject(name, verdict.reason, f"{name}: {'; '.join(verdict.mismatches)[:300]}")
            return
        Metrics.counter(STAGE, "kept").inc()
        progress.tick("replayed")
        yield task
        yield beam.pvalue.TaggedOutput(
            TRAJECTORIES, dataclasses.replace(trajectory, resolved=True, reward=task.score)
        )
        for transition in transitions:
            yield beam.pvalue.TaggedOutput(TRANSITIONS, transition)


def _readme(repo_path: str, commit: str) -> str:
    for name in ("README.md", "README.rst", "README.txt", "README"):
        try:
            return read_file_at(repo_path, commit, name)
        except Exception:  # absent at this commit: try the next name
            continue
    return ""


def _reject(name: str, reason: str, detail: str):
    Metrics.counter(STAGE, f"rejected_{reason}").inc()
    progress.tick(reason)
    return beam.pvalue.TaggedOutput(REJECTED, Rejection(name, STAGE, reason, detail))


class ExploreRepos(beam.PTransform):
    """Source specs -> {"explore_tasks", "trajectories", "transitions", "rejections"}."""

    def __init__(self, params: Params) -> None:
        super().__init__()
        self.params = params

    def expand(self, specs):
        explored = (
            specs
            | "Spread" >> beam.Reshuffle()
            | "ExploreRepo"
            >> beam.ParDo(ExploreRepoFn(self.params)).with_outputs(
                REJECTED, TRAJECTORIES, TRANSITIONS, main="explore_tasks"
            )
        )
        return {
            "explore_tasks": explored.explore_tasks,
            "trajectories": explored[TRAJECTORIES],
            "transitions": explored[TRANSITIONS],
            "rejections": explored[REJECTED],
        }
