// The grader's reporter for node's built-in runner (`node --test`): one keyed record per test on
// the supervisor's pipe when the run ends, then `finish`.
//
// Shipped into the grader's root-owned folder and named twice on node's command line: preloaded
// (`node -r THIS --test`), so it takes the records' key from its one-shot pipe before the runner
// or any project code runs, and as the runner's reporter (`--test-reporter=THIS`: the same
// module, from node's module cache). node runs each test file in a child process of its own
// and passes its `-r` on: there this file runs keyless (the variables naming the key and the pipe
// were deleted before any child started) and only guards the child's exit (below). The
// project's own loader options (`--import tsx`, `--require`...) reach the children alone,
// through NODE_OPTIONS set here from the grader's `trajforge_node_options.json`, so no project
// code runs in this, the reporter's, process.
//
// Ids are validate's (generators/languages/javascript/node_reporter.py read by verifiers/reports/junit.py):
// `file > describe path > title`, the file relative to /repo, the describe path from each
// file's `test:start` nesting; suites are not tests; skip and todo are skipped; a file that
// fails on its own is that file's `collect_error`. One record per id, the worst outcome winning.
//
// A child's events reach this process through its stdout, which the tests' code can write too
// (a forged event is node's own framing): what a child can forge is the word on its own file's
// tests. To hide a real failure it must also stop the run early; a child that exits before its
// event loop drained (`process.exit`, `process.reallyExit`) exits with GUARD_EXIT instead, and
// every test of that file is then failed (docs/security.md says what stays open).
//
// Shipped after trajforge_keyed.js (the key, `send`, `escape`, `relative`, `keepWorst`).
const RANK = { passed: 0, skipped: 1, failed: 2 };
const GUARD_EXIT = 86;
const OPTIONS = path.join(__dirname, 'trajforge_node_options.json');

if (process.env.NODE_TEST_CONTEXT) {
  guardChildExit();
  // the guard: node:assert and node:test fixed, the sentinels planted, before the file loads
  require(path.join(__dirname, 'trajforge_guard.js')).node(process.argv[1]);
} else {
  handOptionsToChildren();
}

// In a test file's process: an exit before node's runner drained the event loop (the tests'
// natural end) is made GUARD_EXIT, whatever code was asked; `--test-force-exit` exits so by
// design, and is left alone.
function guardChildExit() {
  if (process.execArgv.includes('--test-force-exit')) return;
  let drained = false;
  const reallyExit = process.reallyExit;
  process.prependListener('beforeExit', () => { drained = true; });
  Object.defineProperty(process, 'reallyExit', {
    value: function guardedExit(code) {
      reallyExit.call(process, drained ? code : GUARD_EXIT);
    },
    writable: false,
    configurable: false,
  });
}

// In the runner's process: the project's loader options for the children only.
function handOptionsToChildren() {
  let words = [];
  try {
    words = JSON.parse(fs.readFileSync(OPTIONS, 'utf8'));
  } catch (error) {
    return;
  }
  if (!Array.isArray(words) || !words.length) return;
  // this file first, so its guard is in place before the project's preloads run
  const quoted = ['--require', __filename].concat(words)
    .map((w) => '"' + String(w).replace(/(["\\])/g, '\\$1') + '"');
  const own = process.env.NODE_OPTIONS ? process.env.NODE_OPTIONS + ' ' : '';
  process.env.NODE_OPTIONS = own + quoted.join(' ');
}

// A name as validate's JUnit report gives it back: XML turns a line break or tab in an
// attribute into a space (a CR LF into one).
function asJunit(name) {
  return escape(String(name).replace(/\r\n?/g, '\n').replace(/[\t\n]/g, ' '));
}

module.exports = async function* trajforgeNodeReporter(source) {
  const stacks = new Map(); // file -> the names of the tests open at each nesting
  const worst = new Map();
  const byFile = new Map(); // file -> its ids
  const broken = new Set();
  const cut = new Set(); // files whose process exited early (GUARD_EXIT)
  for await (const event of source) {
    const data = (event && event.data) || {};
    const file = relative(data.file);
    const nesting = Number(data.nesting) || 0;
    if (event.type === 'test:start') {
      if (!stacks.has(file)) stacks.set(file, []);
      stacks.get(file)[nesting] = String(data.name);
      continue;
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    if (data.details && data.details.type === 'suite') continue;
    const failed = event.type === 'test:fail';
    if (nesting === 0 && file && relative(data.name) === file) { // the file's own process
      const error = (data.details && data.details.error) || {};
      if (failed) broken.add(file);
      if (failed && error.exitCode === GUARD_EXIT) cut.add(file);
      if (failed) yield 'ERROR ' + asJunit(file) + ' (the file failed on its own)\n';
      continue;
    }
    const parts = (stacks.get(file) || []).slice(0, nesting).filter(Boolean).map(asJunit);
    const id = [asJunit(file)].filter(Boolean).concat(parts, [asJunit(data.name)]).join(' > ');
    const skipped = data.skip !== undefined || data.todo !== undefined;
    const outcome = skipped ? 'skipped' : failed ? 'failed' : 'passed';
    keepWorst(worst, RANK, id, outcome);
    if (!byFile.has(file)) byFile.set(file, new Set());
    byFile.get(file).add(id);
    yield outcome.toUpperCase() + ' ' + id + '\n';
    const error = failed && data.details && data.details.error;
    const said = error ? String((error.cause && error.cause.message) || error.message || '') : '';
    if (said) yield '  ' + said.split('\n')[0].slice(0, 300) + '\n';
  }
  for (const file of cut) {
    for (const id of byFile.get(file) || []) worst.set(id, 'failed');
  }
  for (const file of broken) send({ t: 'collect_error', id: file });
  for (const [id, outcome] of worst) {
    send({ t: 'report', id, when: 'call', outcome, xfail: false, sub: false });
  }
  send({ t: 'finish' });
};
