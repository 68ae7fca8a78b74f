"""Docker's build stream as the lines the build wrote.

The classic builder sends a RUN step's output as it was written, one chunk per write, stdout
and stderr interleaved as they happened to be read, each stderr chunk wrapped in a colour
code. A chunk is not a line: uv's ``error`` and ``: No solution found ...`` can come as two
chunks, and a stdout line can land between a stderr line's pieces. Taking each chunk for a line
made one failed install read differently from run to run (and a profile's recorded install
``attempts`` with it). ``BuildLines`` joins each stream's pieces apart, so every line reads as
its writer wrote it; only the order of two streams' lines can differ between runs.
"""

from __future__ import annotations

STDERR_ON, STDERR_OFF = "\x1b[91m", "\x1b[0m"  # how the builder marks a stderr chunk
STDOUT, STDERR = "stdout", "stderr"


class BuildLines:
    """Chunks in, whole lines out; a line still open when the build ends is kept too."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.open = {STDOUT: "", STDERR: ""}

    def add(self, chunk: str) -> None:
        stream = STDOUT
        if chunk.startswith(STDERR_ON) and chunk.endswith(STDERR_OFF):
            stream, chunk = STDERR, chunk[len(STDERR_ON) : -len(STDERR_OFF)]
        *done, self.open[stream] = (self.open[stream] + chunk).split("\n")
        self.lines += done

    def say(self, line: str) -> None:
        """A line of trajforge's or the engine's own (an error, a timeout), never joined: it
        comes after what the build wrote, lines still open included."""
        self.lines += [self.open[stream] for stream in (STDOUT, STDERR) if self.open[stream]]
        self.open = {STDOUT: "", STDERR: ""}
        self.lines.append(line)

    def text(self) -> list[str]:
        return [line for line in (*self.lines, *self.open.values()) if line.strip()]
