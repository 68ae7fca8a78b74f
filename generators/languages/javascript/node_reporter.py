"""A reporter for node's built-in runner that keeps each test's file: JUnit for ``junit.py``.

node's own reporters (spec, tap, junit) name a test by its describe path and title only, so
``math > adds`` from two files would be one id. Every event node's runner emits carries the
test's ``file``; this reporter (``node --test --test-reporter=PATH``, node 18.15 and later)
tracks each file's ``test:start`` nesting and writes every finished test as a testcase inside
a suite named by its file, then one suite per enclosing describe. A file that fails on its own
(it crashed before or between tests) is a testcase named by the file, which ``junit.py`` reads
as that file's collection error. Plain CommonJS; the test command writes it to ``/tmp``.
"""

from __future__ import annotations

NODE_REPORTER_JS = r"""
var stacks = {};
function esc(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}
module.exports = async function* (source) {
  yield "<testsuites>\n";
  for await (var e of source) {
    var d = e.data || {};
    if (e.type === "test:start") {
      (stacks[d.file] = stacks[d.file] || [])[d.nesting] = d.name;
    } else if ((e.type === "test:pass" || e.type === "test:fail") &&
               !(d.details && d.details.type === "suite")) {
      var path = (stacks[d.file] || []).slice(0, d.nesting);
      var open = path.map(function (n) { return "<testsuite name=\"" + esc(n) + "\">"; }).join("");
      var close = path.map(function () { return "</testsuite>"; }).join("");
      var mark = d.skip !== undefined || d.todo !== undefined ? "<skipped/>"
        : e.type === "test:fail" ? "<failure/>" : "";
      yield "<testsuite name=\"" + esc(d.file || "") + "\" file=\"" + esc(d.file || "") + "\">" +
        open + "<testcase name=\"" + esc(d.name) + "\">" + mark + "</testcase>" + close +
        "</testsuite>\n";
    }
  }
  yield "</testsuites>\n";
};
"""
