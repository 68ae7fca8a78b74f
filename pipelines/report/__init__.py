"""The run report (HTML, charts) and `trajforge stats`, read from stage outputs."""
