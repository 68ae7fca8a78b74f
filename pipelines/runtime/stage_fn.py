"""The base of every stage's DoFn: its name, counters, progress ticks and rejections.

In the spirit of datatrove's BaseFilter: a step says what it keeps and why it drops the rest, and
the base does the bookkeeping the same way everywhere (a Beam counter per reason, a tick of the
progress bar, a ``Rejection`` on the ``rejected`` output). Every count also goes to the bundle's
tally (``tally.py``), so it reaches the summary on runners that keep no metrics. ``SandboxFn``
adds one sandbox per worker, and turns an unreachable engine or a broken sandbox into rejections
that are never cached.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from trajforge.pipelines.runtime import cost, progress
from trajforge.pipelines.runtime.tally import SUMMARY, Tally
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.rejection import Rejection
from trajforge.verifiers.sandbox import usage
from trajforge.verifiers.sandbox.base import Sandbox, SandboxBroken
from trajforge.verifiers.sandbox.factory import make_sandbox

REJECTED = "rejected"  # the tagged output every stage's rejections go to


class StageFn(beam.DoFn):
    """A DoFn of stage ``STAGE``; subclasses emit records and ``self.reject(...)``."""

    STAGE = ""
    # Where the bundle's tally goes: set on every StageFn of a run by ``stage_run`` (its staging
    # folder's ``.tally``); None outside a stage run.
    tally_dir: str | None = None

    def __init__(self, params: Params) -> None:
        self.params = params

    def count(self, name: str, value: int = 1) -> None:
        Metrics.counter(self.STAGE, name).inc(value)
        self._tally.count(self.STAGE, name, value)

    def summary_count(self, name: str, value: int = 1) -> None:
        """A line of the stage's summary (``name: total``), summed over the run."""
        Metrics.counter(SUMMARY, name).inc(value)
        self._tally.count(SUMMARY, name, value)

    def summary_text(self, name: str, value: str) -> None:
        """A line of the stage's summary naming ``value`` (or the sorted values seen)."""
        Metrics.string_set(SUMMARY, name).add(value)
        self._tally.text(SUMMARY, name, value)

    def finish_bundle(self) -> None:
        """Subclasses that override this call it: the bundle's tally is written here, with the
        seconds this process's sandboxes spent since the last bundle (``runtime/cost.py``)."""
        spent = usage.drain()
        for kind, name in ((usage.BUILD, cost.BUILD_MS), (usage.RUN, cost.RUN_MS)):
            if spent.get(kind):
                self.summary_count(name, int(spent[kind] * 1000))
        self._tally.flush(self.tally_dir)

    @property
    def _tally(self) -> Tally:
        """Made on first use in the worker (a DoFn is pickled before it counts anything)."""
        found = self.__dict__.get("_bundle_tally")
        if found is None:
            found = self.__dict__["_bundle_tally"] = Tally()
        return found

    def tick(self, outcome: str, moved: bool = False) -> None:
        """Count ``outcome`` and move the progress bar by one unit (``moved``: it already moved,
        live, when the unit finished: see ``move``)."""
        self.count(outcome)
        if not moved:
            progress.tick(outcome)

    def move(self, outcome: str) -> None:
        """Move the bar now, from any thread, for a unit whose record is emitted later with
        ``moved=True`` (work that finishes one by one inside a batch)."""
        progress.tick(outcome)

    def more_units(self, n: int) -> None:
        """The stage made ``n`` inputs of its own (each ticks once later): the bar's total grows."""
        self.count("units_made", n)
        progress.grow(n)

    def reject(
        self, input_id: str, reason: str, detail: str, moved: bool = False
    ) -> beam.pvalue.TaggedOutput:
        return self.rejection(Rejection(input_id, self.STAGE, reason, detail), moved)

    def rejection(self, rejection: Rejection, moved: bool = False) -> beam.pvalue.TaggedOutput:
        """A rejection made elsewhere (a generator's), counted like the stage's own."""
        self.count(f"rejected_{rejection.reason}")
        if not moved:
            progress.tick(rejection.reason)
        return beam.pvalue.TaggedOutput(REJECTED, rejection)

    def reject_error(self, input_id: str, exc: UserError) -> beam.pvalue.TaggedOutput:
        return self.reject(input_id, exc.reason, str(exc))


class SandboxFn(StageFn):
    """A StageFn holding one sandbox per worker; an unreachable engine becomes rejections.

    A broken sandbox never ends the stage: a ``SandboxBroken`` (a container killed or gone, the
    engine erring) that escapes a subclass's ``process`` becomes a ``sandbox_error`` rejection of
    the element (``input_id`` names it), and the stage goes on with the next one.
    """

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "process" in cls.__dict__:
            cls.process = _guarded(cls.__dict__["process"])  # type: ignore[method-assign]

    def input_id(self, element: Any) -> str:
        """What a rejection of ``element`` is about; the first id its parts carry."""
        parts = element if isinstance(element, (tuple, list)) else (element,)
        for attr in ID_ATTRS:
            for part in parts:
                value = getattr(part, attr, None)
                if isinstance(value, str) and value:
                    return value
        return str(element)[:200]

    # containers per image started ahead (Docker): 0 where each image serves one session
    SPARES = 1

    def setup(self) -> None:
        self.sandbox: Sandbox | None = None
        self.unavailable: UserError | None = None
        try:
            self.sandbox = make_sandbox(self.params, quiet=True, spares=self.SPARES)
        except UserError as exc:
            self.unavailable = exc

    def teardown(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()

    def reject_unavailable(self, input_id: str) -> beam.pvalue.TaggedOutput:
        assert self.unavailable is not None
        return self.reject_error(input_id, self.unavailable)

    def reject_sandbox_error(self, input_id: str, exc: Exception) -> beam.pvalue.TaggedOutput:
        return self.rejection(sandbox_error(input_id, self.STAGE, exc))


ID_ATTRS = ("candidate_id", "instance_id", "task_id", "spec", "input_id")


def _guarded(process: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(process)
    def guarded(self: SandboxFn, element: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        try:
            outputs = process(self, element, *args, **kwargs)
            if outputs is not None:
                yield from outputs
        except SandboxBroken as exc:
            yield self.reject_sandbox_error(self.input_id(element), exc)

    return guarded


def sandbox_error(input_id: str, stage: str, exc: Exception) -> Rejection:
    """The sandbox broke (engine gone, API error): the input is rejected and nothing is cached.
    A ``MachineFault`` (a full disk) keeps its own reason, ``infra_failure``."""
    reason = exc.reason if isinstance(exc, UserError) else SandboxBroken.reason
    detail = f"{input_id}: {reason.replace('_', ' ')} {exc.__class__.__name__}: {exc}"
    return Rejection(input_id, stage, reason, detail.splitlines()[0])
