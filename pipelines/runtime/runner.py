"""Which Beam runner a stage runs on.

``local`` is Beam's in-process FnApiRunner, named explicitly: the default DirectRunner may try to
download the Prism binary at run time, and local runs must not depend on the network. Any other
name (DataflowRunner, FlinkRunner, SparkRunner, PortableRunner) is handed to Beam with the extra
pipeline options the user passed after ``--``.
"""

from __future__ import annotations

import logging

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions

LOCAL = "local"


def make_pipeline(runner: str, beam_args: list[str]) -> beam.Pipeline:
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    if runner == LOCAL:
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        options = PipelineOptions(beam_args)
        return beam.Pipeline(runner=FnApiRunner(), options=options)
    options = PipelineOptions([f"--runner={runner}", *beam_args])
    # Remote workers import trajforge's packages; ship them unless the user set up a container.
    options.view_as(SetupOptions).save_main_session = False
    return beam.Pipeline(options=options)
