"""Which Beam runner a stage runs on.

``local`` is Beam's in-process FnApiRunner, named explicitly: the default DirectRunner may try to
download the Prism binary at run time, and local runs must not depend on the network. ``dask``
(or ``DaskRunner``) is Beam's DaskRunner as ``runtime/dask_runner.py`` completes it, on the
scheduler ``scheduler`` names (an address, or a scheduler file) or else on a ``LocalCluster`` of
``workers`` processes started for the run. Any other name (DataflowRunner, FlinkRunner,
SparkRunner, PortableRunner) is handed to Beam with the extra pipeline options the user passed
after ``--``.
"""

from __future__ import annotations

import logging
import os

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions
from trajforge.schemas.params import is_dask

LOCAL = "local"


def make_pipeline(
    runner: str, beam_args: list[str], *, workers: int = 2, scheduler: str | None = None
) -> beam.Pipeline:
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    if runner == LOCAL:
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        options = PipelineOptions(beam_args)
        return beam.Pipeline(runner=FnApiRunner(), options=options)
    if is_dask(runner):
        from trajforge.pipelines.runtime.dask_runner import DaskRunner

        logging.getLogger("distributed").setLevel(logging.ERROR)
        args = [*beam_args, *_scheduler_args(beam_args, scheduler)]
        return beam.Pipeline(runner=DaskRunner(workers), options=PipelineOptions(args))
    options = PipelineOptions([f"--runner={runner}", *beam_args])
    # Nothing of this process is pickled for the workers: they import trajforge themselves, so
    # their image must have it installed (``--sdk_container_image``, or ``--extra_package`` with
    # a built sdist after ``--``; see the README's "Running at scale").
    options.view_as(SetupOptions).save_main_session = False
    return beam.Pipeline(options=options)


def _scheduler_args(beam_args: list[str], scheduler: str | None) -> list[str]:
    """``pipeline.dask_scheduler`` as Beam's Dask options, unless they were given after ``--``:
    a file (an existing one, or a ``.json`` name) is a scheduler file, anything else an
    address."""
    given = any(a.startswith(("--dask_client_address", "--dask_scheduler_file")) for a in beam_args)
    if not scheduler or given:
        return []
    if os.path.isfile(scheduler) or scheduler.endswith(".json"):
        return [f"--dask_scheduler_file={scheduler}"]
    return [f"--dask_client_address={scheduler}"]
