// The grader's jest reporter: each test file's results leave jest's process as records on the
// supervisor's pipe the moment jest hands them to its reporters.
//
// Shipped into the grader's root-owned folder and named twice on node's command line: preloaded
// (`node -r THIS jest.js`), so it takes the records' key from its one-shot pipe before jest or
// any project code runs, and as jest's reporter (`--reporters THIS`: the same module, from
// node's module cache). The key and the pipe's number then live only in this closure: the
// variables that named them are deleted, so jest's worker processes (where the tests run) are
// started without them. A record is `KEY {json}` on one line, written with one write; the
// supervisor keeps only keyed lines, and the host reads them by channel.py's rules (first word
// wins, a second record for a test or anything after `finish` is tampering).
//
// Shipped after trajforge_keyed.js (the key, `send`, `relative`, `keepWorst`).
//
const RANK = { passed: 0, skipped: 1, failed: 2 };
const GUARD = path.join(__dirname, 'trajforge_guard.js');

// Where tests run (a worker, which node starts with this file preloaded too, or jest's own
// process in band): jest-circus's adapter is handed the project's configuration with the
// grader's guard last in its setupFilesAfterEnv (the CLI option would replace the project's
// list), so the guard runs in each test file's context after the project's own setup files,
// which may wrap jest's globals themselves (jest-expect-message replaces `expect`).
(function appendGuard() {
  const Module = require('module');
  const load = Module._load;
  // jest-circus (jest 27+'s default) and jest-jasmine2 (before 27): both take the project's
  // configuration second and run its setupFilesAfterEnv in the test file's context
  const adapter = /jest-circus[\\/]runner(\.js)?$|jest-jasmine2([\\/]build[\\/]index\.js)?$/;
  const guarded = new WeakMap(); // jest requires the adapter again for each test file
  Module._load = function loadWithGuard(request) {
    const loaded = load.apply(this, arguments);
    if (typeof loaded !== 'function' || typeof request !== 'string' || !adapter.test(request)) {
      return loaded;
    }
    if (!guarded.has(loaded)) {
      guarded.set(loaded, function guardedAdapter(globalConfig, config, ...rest) {
        const own = (config && config.setupFilesAfterEnv) || [];
        const setup = own.includes(GUARD) ? own : own.concat([GUARD]);
        return loaded.call(this, globalConfig, { ...config, setupFilesAfterEnv: setup }, ...rest);
      });
    }
    return guarded.get(loaded);
  };
})();
const OUTCOME = {
  passed: 'passed', focused: 'passed', failed: 'failed',
  pending: 'skipped', skipped: 'skipped', todo: 'skipped', disabled: 'skipped',
};

function testId(file, ancestors, title) {
  const parts = [file].concat((ancestors || []).filter(Boolean), [title]);
  return parts.join(' > ');
}

class TrajforgeJestReporter {
  onTestResult(test, result) {
    const file = relative(result.testFilePath);
    if (result.testExecError) send({ t: 'collect_error', id: file });
    const worst = new Map(); // one record per id: a title repeated in a file, the worst wins
    for (const one of result.testResults || []) {
      const id = testId(file, one.ancestorTitles, String(one.title));
      const outcome = OUTCOME[one.status] || 'failed';
      keepWorst(worst, RANK, id, outcome);
    }
    for (const [id, outcome] of worst) {
      send({ t: 'report', id, when: 'call', outcome, xfail: false, sub: false });
    }
  }

  onRunComplete() {
    send({ t: 'finish' });
  }

  getLastError() {
    return undefined;
  }
}

module.exports = TrajforgeJestReporter;
