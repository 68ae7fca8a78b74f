"""Counters reach the summary on a runner that keeps no metrics: Beam's own DaskRunner.

Beam's DaskRunner raises on ``result.metrics()``. Every StageFn also writes its bundle's counts as
a tally file; the summary is then read from those files, and must say what the in-process
runner's metrics say. Real runners, a real dask.distributed cluster of worker processes.
"""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.dask.dask_runner import DaskRunner as BeamDaskRunner
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from trajforge.pipelines.runtime import tally
from trajforge.pipelines.runtime.stage_fn import StageFn
from trajforge.pipelines.runtime.stage_run import _TallyInto, summary_counters
from trajforge.schemas.params import Params

pytestmark = pytest.mark.dask


class CountFn(StageFn):
    """Counts what a stage's summary reports: a SUMMARY_COUNTERS name, summary lines, texts."""

    STAGE = "count"

    def process(self, n: int):
        self.count("cache_hits", n % 2)
        self.summary_count("files")
        self.summary_text("format", "swe-smith" if n < 5 else "nebius")
        yield n


def _run(runner, options: list[str], directory: str):
    pipeline = beam.Pipeline(runner=runner, options=PipelineOptions(options))
    _ = pipeline | beam.Create(list(range(12))) | beam.ParDo(CountFn(Params()))
    pipeline.visit(_TallyInto(directory))
    result = pipeline.run()
    result.wait_until_finish()
    return result


def test_a_runner_without_metrics_gets_its_counters_from_the_tally(cluster, tmp_path):
    local = _run(FnApiRunner(), [], str(tmp_path / "local"))
    expected = summary_counters(local, str(tmp_path / "local"))
    assert expected == {"cache_hits": 6, "files": 12, "format": ["nebius", "swe-smith"]}

    address = f"--dask_client_address={cluster.scheduler_address}"
    result = _run(BeamDaskRunner(), [address], str(tmp_path / "dask"))
    with pytest.raises(NotImplementedError):
        result.metrics().query()  # Beam's own DaskRunner keeps none
    assert list((tmp_path / "dask").glob("*.json")), "no bundle wrote a tally"
    assert summary_counters(result, str(tmp_path / "dask")) == {"counted_from": "tally", **expected}
    result.client.close()  # Beam's runner leaves its client open (it would retry at exit)
    tally.remove(str(tmp_path / "dask"))
    assert not (tmp_path / "dask").exists()
