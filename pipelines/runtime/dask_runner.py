"""Beam on a Dask cluster: Beam's DaskRunner, with the gaps that lose data filled.

Beam 2.77's ``apache_beam.runners.dask.dask_runner.DaskRunner`` turns the pipeline into Dask bags
and computes them on a ``dask.distributed`` cluster. As shipped it would corrupt every trajforge
stage, so this subclass keeps its options, its overrides (Create, GroupByKey, Flatten, Reshuffle)
and its GroupByKey translation, and translates the rest itself:

- **Tagged outputs.** Beam's translation puts a DoFn's main and tagged outputs in one bag and
  hands all of it to every consumer: a stage's rejections would land in its kept table too. Here
  a ParDo's bag holds ``(tag, value)`` pairs and each consumer reads its own tag.
- **Every branch.** Beam computes only the bag of the last transform it visits, so a pipeline
  with several sinks writes one of them. Here every transform whose output nobody reads is
  computed.
- **finish_bundle.** Beam collects a bundle's outputs before ``finish_bundle`` runs, so what a
  DoFn emits there (the last batch of ``BatchElements``) is lost. Here it is kept.
- **Metrics.** Beam's result raises on ``metrics()``. Here each bundle runs under its own
  ``MetricsContainer`` and returns its counters with its outputs; a task that a lost worker
  makes Dask rerun counts once, like Beam's committed metrics.
- **Side inputs** are materialised once as Dask items that every bundle depends on (Beam's
  translation computed the side input's whole graph again inside each bundle).
- **Reshuffle** spreads elements over more partitions (Beam's is a no-op, so a stage that reads
  one file ran on one worker), and **Create** splits its values over the cluster's threads.

Each bundle (a Dask partition) gets a fresh copy of the DoFn, unpickled with Beam's pickler: set
up, run, finished and torn down there, so nothing is shared between bundles or processes.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.internal import pickler
from apache_beam.metrics.execution import MetricsContainer
from apache_beam.pipeline import AppliedPTransform, PipelineVisitor
from apache_beam.runners.common import (
    DoFnContext,
    DoFnInvoker,
    DoFnSignature,
    Receiver,
    _OutputHandler,
)
from apache_beam.runners.dask import dask_runner as beam_dask
from apache_beam.runners.dask.overrides import (
    _Create,
    _Flatten,
    _GroupByKeyOnly,
    _Reshuffle,
    dask_overrides,
)
from apache_beam.runners.dask.transform_evaluator import get_windowed_value
from apache_beam.runners.direct.direct_metrics import DirectMetrics
from apache_beam.runners.runner import PipelineResult, PipelineState
from apache_beam.runners.worker import statesampler
from apache_beam.transforms.sideinputs import SideInputMap
from apache_beam.utils.counters import CounterFactory
from apache_beam.utils.windowed_value import WindowedValue
from trajforge.pipelines.runtime import progress
from trajforge.schemas.storage import use_environment_options

METRICS = "__trajforge_metrics__"  # the tag a bundle's metric updates travel under
# Partitions (bundles) per worker thread: what Create and Reshuffle make, and the most a Flatten
# or a GroupByKey leaves. More balance slow elements better but multiply shuffle tasks (curate on
# 2 threads: 1,645 tasks at 1 per thread, 3,687 at 2); ``-- --dask_npartitions N`` sets the count.
PARTITIONS_PER_THREAD = 1


class DaskRunner(beam_dask.DaskRunner):
    """Beam's DaskRunner with the translation above. With no ``--dask_client_address`` and no
    ``--dask_scheduler_file``, the run starts a ``LocalCluster`` of ``workers`` processes (one
    thread each) and closes it when the run ends."""

    def __init__(self, workers: int = 2) -> None:
        super().__init__()
        self.workers = workers

    def run_pipeline(self, pipeline, options) -> DaskResult:
        from dask.distributed import Client

        dask_options = options.view_as(beam_dask.DaskOptions).get_all_options(
            drop_default=True, current_only=True
        )
        npartitions = dask_options.pop("npartitions", None)
        partition_size = dask_options.pop("partition_size", None)
        cluster = None
        if not dask_options.get("address") and not dask_options.get("scheduler_file"):
            cluster = local_cluster(self.workers)
            dask_options["address"] = cluster
        try:
            client = Client(**dask_options)
            try:
                timeout = dask_options.get("timeout")
                client.wait_for_workers(1, timeout=timeout if isinstance(timeout, int) else 120)
                client.subscribe_topic(progress.TOPIC, progress.from_worker)  # the live bar
                threads = sum(client.nthreads().values()) or 1
                translate = _Translate(
                    npartitions or PARTITIONS_PER_THREAD * threads, partition_size,
                    _thread_slots(client),
                )  # fmt: skip
                pipeline.replace_all(dask_overrides())
                pipeline.visit(translate)
                future = client.compute(translate.final())
            except BaseException:
                client.close()
                raise
        except BaseException:
            if cluster is not None:
                cluster.close()
            raise
        return DaskResult(client, cluster, future)


def local_cluster(workers: int) -> Any:
    """A ``LocalCluster`` of ``workers`` processes of one thread each, quiet: the worker
    processes log nothing below CRITICAL (they log each start and stop at INFO otherwise)."""
    import dask
    from dask.distributed import LocalCluster

    # Worker processes log nothing: a task's error reaches the run as its exception, and what
    # they would log at ERROR is the scheduler going away first when the run ends (a heartbeat
    # to a closed scheduler, with its traceback).
    quiet = {"distributed.nanny.pre-spawn-environ.DASK_LOGGING__DISTRIBUTED": "critical"}
    with dask.config.set(quiet):
        return LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            # The scheduler's HTTP routes on a free port, no dashboard: never 8787, which a
            # second cluster on this machine (another stage, a benchmark) would hold already.
            dashboard_address=":0",
            scheduler_kwargs={"dashboard": False},
            silence_logs=logging.ERROR,
            # No per-worker memory cap: the nanny would kill a worker past its share of this
            # machine's memory, and the run would fail on retries instead of using the memory.
            memory_limit=0,
        )


class DaskResult(PipelineResult):
    """Waits for the run, gathers its metrics, and closes the client (and the cluster the run
    started) whatever happens."""

    def __init__(self, client: Any, cluster: Any, future: Any) -> None:
        super().__init__(PipelineState.RUNNING)
        self.client, self.cluster, self.future = client, cluster, future
        self._metrics = DirectMetrics()

    def wait_until_finish(self, duration: int | None = None) -> str:
        if self._state != PipelineState.RUNNING:
            return self._state
        try:
            timeout = duration / 1000 if duration is not None else None
            for updates in self.future.result(timeout=timeout):
                self._metrics.commit_logical(None, updates)
            self._state = PipelineState.DONE
        except BaseException:
            self._state = PipelineState.FAILED
            raise
        finally:
            self._close()
        return self._state

    def cancel(self) -> str:
        self._state = PipelineState.CANCELLED
        self.future.cancel()
        self._close()
        return self._state

    def metrics(self) -> DirectMetrics:
        return self._metrics

    def _close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


@dataclass
class _ParDoSpec:
    """What a bundle needs to run a ParDo; pickled once with Beam's pickler, unpickled per bundle
    (so each bundle has its own DoFn)."""

    label: str
    fn: beam.DoFn
    args: list[Any]
    kwargs: dict[str, Any]
    window_fn: Any
    side_inputs: list[tuple[Any, dict[str, Any], Any]]  # (view type, view options, mapping fn)


class _Translate(PipelineVisitor):
    """Beam primitives -> Dask bags, in the order the pipeline applied them."""

    def __init__(
        self, target_partitions: int, partition_size: int | None, slots: list[str] | None = None
    ) -> None:
        self.target = max(1, target_partitions)
        self.partition_size = partition_size
        self.slots = slots or []  # a worker address per thread: where a Reshuffle's parts go
        self.bags: dict[AppliedPTransform, Any] = {}
        self.tagged: set[AppliedPTransform] = set()  # ParDos: their bags hold (tag, value)
        self.read: set[AppliedPTransform] = set()  # transforms whose output something reads

    def visit_transform(self, node: AppliedPTransform) -> None:
        transform: Any = node.transform
        kind = type(transform)
        inputs = [self._bag_of(p) for p in node.inputs if not isinstance(p, pvalue.PBegin)]
        if kind is _Create:
            self.bags[node] = self._create(transform.values)
        elif kind is beam.ParDo:
            self.bags[node] = self._pardo(node, inputs[0])
            self.tagged.add(node)
        elif kind is _GroupByKeyOnly:
            bag = inputs[0]
            groups = bag.groupby(_key, shuffle="tasks", npartitions=self._fewer(bag))
            self.bags[node] = groups.map(_values)
        elif kind is _Flatten:
            bag = _concat(inputs)
            self.bags[node] = bag.repartition(self._fewer(bag))
        elif kind is _Reshuffle:
            self.bags[node] = _spread(inputs[0], self.target, self.slots)
        elif len(inputs) == 1:
            # What Beam's DaskRunner passes through too: the window steps of its GroupByKey
            # override (its GroupByKey already groups) and WindowInto (one global window here).
            self.bags[node] = inputs[0]
        else:
            raise NotImplementedError(
                f"the Dask runner cannot run {node.full_label} ({kind.__name__})"
            )

    def final(self) -> Any:
        """One bag whose only elements are every bundle's metric updates; computing it computes
        every transform whose output nothing reads (so every sink), and every ParDo."""
        unread = [bag for node, bag in self.bags.items() if node not in self.read]
        metrics = [bag.map_partitions(_select, METRICS) for node, bag in self.bags.items()
                   if node in self.tagged]  # fmt: skip
        return _concat([*(bag.map_partitions(_drop) for bag in unread), *metrics])

    def _bag_of(self, pcoll: pvalue.PCollection) -> Any:
        producer = pcoll.producer
        assert producer is not None, pcoll
        self.read.add(producer)
        bag = self.bags[producer]
        return bag.map_partitions(_select, pcoll.tag) if producer in self.tagged else bag

    def _fewer(self, bag: Any) -> int:
        """Partitions after a Flatten or a GroupByKey: at most the target. (A Flatten adds up its
        inputs' partitions; a stage that flattens and joins repeatedly would otherwise make
        tens of thousands of shuffle tasks out of a few hundred rows.)"""
        return min(bag.npartitions, self.target)

    def _create(self, values: Iterable[Any]) -> Any:
        import dask.bag as db

        items = list(values)
        if self.partition_size:
            return db.from_sequence(items, partition_size=self.partition_size)
        return db.from_sequence(items, npartitions=max(1, min(len(items), self.target)))

    def _pardo(self, node: AppliedPTransform, bag: Any) -> Any:
        transform: Any = node.transform
        args, kwargs = transform.raw_side_inputs
        main = next(iter(node.main_inputs.values()))
        spec = _ParDoSpec(
            node.full_label,
            transform.fn,
            list(args),
            dict(kwargs),
            main.windowing.windowfn if hasattr(main, "windowing") else None,
            [(type(s), s._view_options(), s._window_mapping_fn) for s in node.side_inputs],
        )
        try:
            blob = pickler.dumps(spec)
        except Exception as exc:
            raise TypeError(
                f"{node.full_label}: its DoFn or arguments cannot be pickled for Dask workers "
                f"({exc.__class__.__name__}: {exc})"
            ) from exc
        sides = [self._bag_of(s.pvalue).reduction(list, _chain) for s in node.side_inputs]
        # The step's name in Dask's keys (and dashboard): a stage's bundles are easy to find.
        return bag.map_partitions(_run_bundle, blob, *sides, token=node.full_label)


def _thread_slots(client: Any) -> list[str]:
    """Every worker's address once per thread, interleaved (a, b, a, b ...)."""
    threads = client.nthreads()
    rounds = max(threads.values(), default=0)
    return [w for n in range(rounds) for w in sorted(threads) if threads[w] > n]


def _spread(bag: Any, target: int, slots: list[str]) -> Any:
    """Beam's Reshuffle: every element dealt round robin over ``target`` partitions. Work that
    arrives in one partition (all of one profile's candidates after a GroupByKey) then reaches
    every worker; repartitioning alone keeps a full partition whole. Each input partition is cut
    into ``target`` pieces and each output partition joins its pieces, so every element moves
    once. Part j prefers the worker of thread slot j: Dask would otherwise run every part where
    its input is (one worker) and steal too late for work of minutes per element. Deterministic:
    the same input gives the same partitions."""
    import dask
    import dask.bag as db

    parts = bag.to_delayed(optimize_graph=False)
    cut = [dask.delayed(_deal, nout=target)(part, target, place) for place, part in
           enumerate(parts)]  # fmt: skip
    joined = []
    for j in range(target):
        where = {"workers": [slots[j % len(slots)]], "allow_other_workers": True} if slots else {}
        with dask.annotate(**where):
            joined.append(dask.delayed(_chain)([pieces[j] for pieces in cut]))
    return db.from_delayed(joined)


def _deal(items: Iterable[Any], target: int, offset: int) -> tuple[list[Any], ...]:
    """Partition ``offset``'s items in ``target`` pieces, round robin from piece ``offset``."""
    pieces: tuple[list[Any], ...] = tuple([] for _ in range(target))
    for place, item in enumerate(items):
        pieces[(place + offset) % target].append(item)
    return pieces


def _concat(bags: list[Any]) -> Any:
    import dask.bag as db

    if not bags:
        return db.from_sequence([], npartitions=1)
    return db.concat(bags) if len(bags) > 1 else bags[0]


def _key(item: tuple[Any, Any]) -> Any:
    return item[0]


def _values(group: tuple[Any, list[Any]]) -> tuple[Any, list[Any]]:
    key, items = group
    return key, [_unwindow(item[1]) for item in items]


def _unwindow(value: Any) -> Any:
    return value.value if isinstance(value, WindowedValue) else value


def _select(pairs: Iterable[tuple[Any, Any]], tag: Any) -> list[Any]:
    return [value for t, value in pairs if t == tag]


def _drop(items: Iterable[Any]) -> list[Any]:
    for _ in items:  # reading the partition is what computes it
        pass
    return []


def _chain(parts: Iterable[list[Any]]) -> list[Any]:
    return list(itertools.chain.from_iterable(parts))


class _Receiver(Receiver):
    def __init__(self, tag: str | None, out: list[tuple[Any, Any]]) -> None:
        self.tag, self.out = tag, out

    def receive(self, windowed_value: WindowedValue) -> None:
        self.out.append((self.tag, windowed_value.value))


class _Receivers(dict):
    """One receiver per output tag (None: the main output), all into one list of pairs."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[tuple[Any, Any]] = []

    def __missing__(self, tag: str | None) -> _Receiver:
        receiver = self[tag] = _Receiver(tag, self.out)
        return receiver


def _run_bundle(items: Iterable[Any], blob: bytes, *sides: list[Any]) -> list[tuple[Any, Any]]:
    """One Dask partition through a fresh copy of the DoFn: setup, start_bundle, every element,
    finish_bundle, teardown; its outputs as (tag, value) and its metrics under ``METRICS``."""
    elements = list(items)
    if not elements:
        return []
    use_environment_options()  # this worker's s3:// (or gs://) credentials, from its own env
    spec: _ParDoSpec = pickler.loads(blob)
    receivers = _Receivers()
    container = MetricsContainer(spec.label)
    sampler = statesampler.StateSampler("dask", CounterFactory())
    previous = statesampler.get_current_tracker()
    statesampler.set_current_tracker(sampler)
    try:
        with sampler.scoped_state(spec.label, "process", metrics_container=container):
            side_inputs = [
                SideInputMap(view, options, [get_windowed_value(v, mapping) for v in values])
                for (view, options, mapping), values in zip(spec.side_inputs, sides, strict=True)
            ]
            handler = _OutputHandler(
                window_fn=spec.window_fn,
                main_receivers=receivers[None],
                tagged_receivers=receivers,
                per_element_output_counter=None,
                output_batch_converter=None,
                process_yields_batches=False,
                process_batch_yields_elements=False,
            )
            invoker = DoFnInvoker.create_invoker(
                DoFnSignature(spec.fn),
                handler,
                context=DoFnContext(spec.label, state=None),
                side_inputs=side_inputs,
                input_args=spec.args,
                input_kwargs=spec.kwargs,
                user_state_context=None,
                bundle_finalizer_param=beam.DoFn.BundleFinalizerParam(),
            )
            invoker.invoke_setup()
            invoker.invoke_start_bundle()
            for element in elements:
                invoker.invoke_process(get_windowed_value(element, spec.window_fn))
            invoker.invoke_finish_bundle()
            invoker.invoke_teardown()
    finally:
        statesampler.set_current_tracker(previous)
    return [*receivers.out, (METRICS, container.get_cumulative())]
