"""The test files a runner that names no file in its report would run, listed in the image.

``node --test`` and ava write a test's title without its file (ava a lossy prefix of it), so
their commands run one file at a time and need the list first: ``LIST_TESTS_JS`` prints it,
one path a line relative to /repo, for ``node -e LIST_TESTS_JS -- MODE EXTS [PATH|GLOB|!GLOB]...``.
MODE is ``node`` (node 18-22's naming conventions; a folder is searched by them) or ``ava``
(ava's defaults, or package.json's ``ava.files``; ``_`` files, fixtures and helpers left out).
Plain ES5, so node 12 runs it too; node_modules and .git are never walked.
"""

from __future__ import annotations

LIST_TESTS_JS = r"""
var fs = require("fs");
var args = process.argv.slice(1), mode = args.shift(), exts = args.shift().split(",");
var ext = "\\.(" + exts.join("|") + ")$";
var conventions = {
  node: ["(^|/)(test|test-[^/]*|[^/]*[._-]test)" + ext, "(^|/)test/.*" + ext],
  ava: ["^(src/|source/)?test" + ext, "(^|/)test-[^/]*" + ext, "\\.(spec|test)" + ext,
        "(^|/)(test|tests|__tests__)/.*" + ext]
}[mode].map(function (r) { return new RegExp(r); });
if (mode === "ava" && !args.length) {
  try { args = (JSON.parse(fs.readFileSync("package.json", "utf8")).ava || {}).files || []; }
  catch (e) { args = []; }
}
function glob(g) {
  return new RegExp("^" + g.replace(/^\.\//, "").replace(/[.+^${}()|\\]/g, "\\$&")
    .replace(/\*\*\//g, "\u0000").replace(/\*\*/g, ".*").replace(/\*/g, "[^/]*")
    .replace(/\?/g, "[^/]").replace(/\u0000/g, "(.*/)?") + "$");
}
function walk(dir, out) {
  var names = [];
  try { names = fs.readdirSync(dir).sort(); } catch (e) { return out; }
  names.forEach(function (n) {
    if (n === "node_modules" || n === ".git") return;
    var p = dir === "." ? n : dir + "/" + n, s = fs.lstatSync(p);
    if (s.isDirectory()) walk(p, out); else if (s.isFile()) out.push(p);
  });
  return out;
}
function skipped(f) {
  return mode === "ava" && /(^|\/)(_[^/]*|fixtures\/.*|helpers\/.*)$/.test(f);
}
function conventional(f) { return conventions.some(function (r) { return r.test(f); }); }
var files = walk(".", []), picked = {};
var include = args.filter(function (a) { return a.charAt(0) !== "!"; });
var exclude = args.filter(function (a) { return a.charAt(0) === "!"; })
  .map(function (a) { return glob(a.slice(1)); });
if (!include.length) files.filter(conventional).forEach(function (f) { picked[f] = 1; });
include.forEach(function (a) {
  var clean = a.replace(/^\.\//, "").replace(/\/$/, "");
  if (/[*?[]/.test(a)) {
    var re = glob(a);
    files.forEach(function (f) { if (re.test(f)) picked[f] = 1; });
  } else if (files.indexOf(clean) >= 0) picked[clean] = 1;
  else files.forEach(function (f) {
    if (f.indexOf(clean + "/") === 0 && conventional(f)) picked[f] = 1;
  });
});
Object.keys(picked).sort().forEach(function (f) {
  if (!skipped(f) && !exclude.some(function (r) { return r.test(f); })) console.log(f);
});
"""


def compact(script: str) -> str:
    """The script with its indentation and blank lines dropped (it travels in a command)."""
    return " ".join(line.strip() for line in script.splitlines() if line.strip())
