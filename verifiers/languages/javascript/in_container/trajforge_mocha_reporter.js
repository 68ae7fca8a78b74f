// The grader's mocha reporter: one keyed record per test on the supervisor's pipe, then `finish`.
//
// Shipped into the grader's root-owned folder and named twice on node's command line: preloaded
// (`node -r THIS _mocha`), so it takes the records' key from its one-shot pipe before mocha or
// any project code runs, and as mocha's reporter (`--reporter THIS`: the same module, from
// node's module cache). The key and the pipe's number then live only in this closure; the
// variables that named them are deleted. mocha runs the tests in this very process, so this
// guards against a test that writes to the pipe or prints records (no key), or exits early (no
// `finish`); a second reporter (the tests' own) repeats ids, which the host reads as tampering.
// It does not guard against code that bends mocha's objects in place, or drives mocha (or this
// reporter) itself and exits before the real run ends (docs/security.md).
//
// Ids are validate's (verifiers/reports/mocha.py): `file > suite path > title`, the suite path
// being the test's fullTitle less its title (one part), a failed hook an ERROR under its own
// title. One record per id, the worst outcome winning, sent when mocha ends the run.
//
// Shipped after trajforge_keyed.js (the key, `send`, `escape`, `relative`, `keepWorst`).
//
// Taken at preload, before any project code, as the prelude's writers are.
const write = process.stdout.write.bind(process.stdout);

// The grader's guard (trajforge_guard.js), before mocha reads any test file: node:assert fixed,
// mocha's globals taken from mocha alone, the sentinels planted in each graded file; here
// (mocha's Suite beside the program node runs) and in the workers of a --parallel run.
{
  const guard = path.join(__dirname, 'trajforge_guard.js');
  require(guard).mocha(process.argv[1]);
  const own = process.env.NODE_OPTIONS ? process.env.NODE_OPTIONS + ' ' : '';
  process.env.NODE_OPTIONS = own + '--require "' + guard.replace(/(["\\])/g, '\\$1') + '"';
  process.env.TRAJFORGE_GUARD = 'mocha';
}
const RANK = { passed: 0, skipped: 2, error: 3, failed: 4 };

function testId(test) {
  const title = String(test.title);
  const full = typeof test.fullTitle === 'function' ? String(test.fullTitle()) : title;
  const suite = full.endsWith(' ' + title) ? full.slice(0, full.length - title.length - 1) : '';
  const file = relative(test.file);
  return [file, suite].filter(Boolean).concat([title]).map(escape).join(' > ');
}

function isHook(test) {
  const title = String(test.title);
  return test.type === 'hook' || (/^"(before|after)/.test(title) && title.includes('" hook'));
}

function TrajforgeMochaReporter(runner) {
  const worst = new Map();
  const note = (test, outcome) => {
    const id = testId(test);
    keepWorst(worst, RANK, id, outcome);
    write(outcome.toUpperCase() + ' ' + id + '\n');
  };
  runner.on('pass', (test) => note(test, 'passed'));
  runner.on('pending', (test) => note(test, 'skipped'));
  runner.on('fail', (test, error) => {
    note(test, isHook(test) ? 'error' : 'failed');
    const said = error && error.message ? String(error.message).split('\n')[0] : '';
    if (said) write('  ' + said.slice(0, 300) + '\n');
  });
  runner.once('end', () => {
    for (const [id, outcome] of worst) {
      const when = outcome === 'error' ? 'setup' : 'call';
      const said = outcome === 'error' ? 'failed' : outcome;
      send({ t: 'report', id, when, outcome: said, xfail: false, sub: false });
    }
    send({ t: 'finish' });
  });
}

module.exports = TrajforgeMochaReporter;
