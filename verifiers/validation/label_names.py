"""Their test names onto our ids: a JS dataset's names, read against the ids our runs reported.

Our JS ids are ``file > describe > ... > title`` (``verifiers/reports/ids.py``). The datasets name
tests by what their log parsers could see:

- Multi-SWE-bench (``harness/repos/javascript/<org>/<repo>.py``): jest ``--verbose`` lines give
  ``file`` (a whole file's PASS/FAIL line) and ``file:title`` (the test's own title, its describe
  titles lost); mocha's spec lines give the bare ``title``.
- SWE-PolyBench (``parsers/``): jest ``<container path>-><full name>`` (describe titles and title
  joined by spaces; tailwind's parser the bare title), mocha's ``fullTitle`` (the same, without a
  file), a TAP line's ``<n> <title>``.

A name maps when exactly one of our ids answers to it under its dataset's readings. A name for a
whole file (jest's PASS/FAIL line for it) is kept with the ids of ours in that file, for the label
check to judge the file as their runner did. A name that none or several of our ids answer to is
not mapped: it stays as theirs with why, for the label check's ``name_unmapped``. Go's names
(``TestX/sub``, no package) map to our ``package/dir::TestX/sub`` when one package alone has the
test. Multi-SWE-bench's Go parsers also cut each name at its last ``/`` (``get_base_name``), so a
subtest whose own name holds one (``t.Run(url)``: ``TestX/http://h/a/b``) is listed cut inside
it (``TestX/http://h/a``); a name no id of ours is, is read as that cut: the one test it cuts, or
the tests of one package it folds together, judged as one line like a whole file. Nothing is
guessed. Other datasets' ids are ours already (pytest node ids) and pass
through untouched.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from trajforge.verifiers.reports.ids import SEPARATOR

NODE_SEPARATOR = "::"  # a pytest node id's, and Go's package/dir::TestName

MULTI_SWE_BENCH = "multi-swe-bench"
SWE_POLYBENCH = "swe-polybench"
WHOLE_FILE = "a whole test file (their runner's file line)"
FOLDED = "subtests their log parser cut to one name at its last /"
NO_MATCH = "no test here answers to it (not run here, or named otherwise)"
_TAP_NUMBER = re.compile(r"\d+ (?:- )?(.+)")
_SHOWN = 3  # ambiguous names: how many of ours the reason lists


@dataclass(frozen=True)
class NameMap:
    """Their name -> our id for each name that maps, -> why for each that does not, and a name
    that stands for several of ours (a whole file's, or subtests ``folded`` into one) -> them."""

    ours: dict[str, str] = field(default_factory=dict)
    unmapped: dict[str, str] = field(default_factory=dict)
    files: dict[str, frozenset[str]] = field(default_factory=dict)
    folded: frozenset[str] = frozenset()  # the names in ``files`` that are cut subtest names

    def group_kind(self, name: str) -> str:
        """What a name in ``files`` stands for, as the label check's reasons say it."""
        return FOLDED if name in self.folded else WHOLE_FILE

    def theirs_as_ours(self, names: Iterable[str]) -> set[str]:
        """The names that map, as our ids; a name in no map is already ours."""
        return {self.ours.get(n, n) for n in names if n not in self.unmapped | self.files}


class _Ours:
    """Our ids indexed by the parts the datasets' names keep."""

    def __init__(self, ids: Iterable[str]) -> None:
        self.ids = set(ids)
        self.files: dict[str, set[str]] = defaultdict(set)
        self.by_key: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        for test_id in self.ids:
            file, sep, rest = test_id.partition(SEPARATOR)
            if not sep:
                self._node_id(test_id)
                continue
            self.files[file].add(test_id)
            parts = rest.split(SEPARATOR)
            for key in (("leaf", parts[-1]), ("full", " ".join(parts))):
                self.by_key[(key[0], file, key[1])].add(test_id)
                self.by_key[(key[0], "", key[1])].add(test_id)

    def _node_id(self, test_id: str) -> None:
        """A node id (``file::name``, Go's ``package/dir::TestX/sub``) answers to its name
        alone: Go datasets (Multi-SWE-bench, SWE-smith) print ``TestX/sub`` with no package."""
        _, sep, name = test_id.partition(NODE_SEPARATOR)
        if sep and name:
            self.by_key[("full", "", name)].add(test_id)
            if "/" in name:  # as Multi-SWE-bench's Go parsers keep it (``get_base_name``)
                self.by_key[("cut", "", name.rsplit("/", 1)[0])].add(test_id)

    def titled(self, file: str, title: str) -> set[str]:
        """Ours in ``file`` ("" for any file) whose title, or describe path and title joined by
        spaces, is ``title``."""
        return self.by_key.get(("leaf", file, title), set()) | self.by_key.get(
            ("full", file, title), set()
        )


Reading = Callable[[str, _Ours], "set[str] | str"]


def map_names(dataset: str, names: Iterable[str], our_ids: Iterable[str]) -> NameMap:
    """Each of ``names`` that is not one of ``our_ids`` read by ``dataset``'s rule; an empty map
    for a dataset whose names are ours, or when we have no ids to read them against."""
    reading = READINGS.get(dataset)
    ours = _Ours(our_ids)
    if reading is None or not ours.ids:
        return NameMap()
    mapped: dict[str, str] = {}
    unmapped: dict[str, str] = {}
    files: dict[str, frozenset[str]] = {}
    folded: set[str] = set()
    for name in dict.fromkeys(names):
        if name in ours.ids:
            continue
        found = reading(name, ours)
        if found == WHOLE_FILE:
            files[name] = frozenset(ours.files[name])
        elif isinstance(found, _Folded):
            files[name] = frozenset(found)
            folded.add(name)
        elif isinstance(found, str):
            unmapped[name] = found
        elif len(found) == 1:
            mapped[name] = next(iter(found))
        elif not found:
            unmapped[name] = NO_MATCH
        else:
            shown = ", ".join(sorted(found)[:_SHOWN])
            unmapped[name] = f"{len(found)} tests here answer to it ({shown}...): ambiguous"
    return NameMap(mapped, unmapped, files, frozenset(folded))


class _Folded(set[str]):
    """Ours that one cut name folds together, all in one package: judged as one line."""


def _multi_swe_bench(name: str, ours: _Ours) -> set[str] | str:
    if name in ours.files:
        return WHOLE_FILE
    splits = list(_file_splits(name, ":", ours))
    if splits:  # jest --verbose: the file, then the test's own title
        return {t for file, title in splits for t in ours.by_key.get(("leaf", file, title), ())}
    return _bare(name, ours) or _cut(name, ours)


def _cut(name: str, ours: _Ours) -> set[str]:
    """Ours that their Go parser prints as ``name`` (each cut at its last ``/``): one package's
    are folded into it; several packages' make it ambiguous."""
    cut = ours.by_key.get(("cut", "", name), set())
    packages = {test_id.partition(NODE_SEPARATOR)[0] for test_id in cut}
    return _Folded(cut) if len(cut) > 1 and len(packages) == 1 else cut


def _polybench(name: str, ours: _Ours) -> set[str] | str:
    if "->" in name:
        path, _, title = name.partition("->")
        files = [f for f in ours.files if path == f or path.endswith("/" + f)]
        if not files:
            return NO_MATCH
        return {t for f in files for t in ours.titled(f, title)}
    found = _bare(name, ours)
    tap = _TAP_NUMBER.fullmatch(name)
    return found | _bare(tap.group(1), ours) if tap else found


def _bare(title: str, ours: _Ours) -> set[str]:
    """A title with no file: our tests whose title (or describe path and title) it is."""
    return ours.titled("", title)


def _file_splits(name: str, sep: str, ours: _Ours) -> Iterator[tuple[str, str]]:
    """Every (file, rest) split of ``name`` at ``sep`` whose file is one of ours."""
    start = 0
    while (at := name.find(sep, start)) != -1:
        if name[:at] in ours.files:
            yield name[:at], name[at + len(sep) :]
        start = at + 1


READINGS: dict[str, Reading] = {MULTI_SWE_BENCH: _multi_swe_bench, SWE_POLYBENCH: _polybench}
