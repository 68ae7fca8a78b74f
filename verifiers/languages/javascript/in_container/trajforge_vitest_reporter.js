// The grader's vitest reporter: one keyed record per test on the supervisor's pipe, then `finish`.
//
// Preloaded (`node -r THIS vitest.mjs run`), so it takes the records' key from its one-shot pipe
// before vitest or any project code runs; vitest loads its reporters through vite's module
// runner, a module instance of its own, so the reporter vitest is given
// (trajforge_vitest_entry.mjs) hands it this module from node's cache, where the key lives in
// this closure. The variables that named the key and the pipe are deleted before any worker
// starts; the tests run in vitest's workers (threads or child processes), not in this module's
// isolate.
//
// Ids are validate's (verifiers/reports/jest.py reading vitest's JSON report): the file, every
// suite name up the test's chain (empty ones dropped), the test's name; the status as the JSON
// reporter maps a test's state or mode. One record per id, the worst outcome winning, sent when
// vitest finishes (vitest 0.x to 4); a file that failed with no failing test is a collection
// error.
//
// Shipped after trajforge_keyed.js (the key, `send`, `escape`, `relative`, `keepWorst`).
//
const RANK = { passed: 0, skipped: 1, failed: 2 };
// vitest's JSON reporter: a test's result state, else its mode, else skipped.
const OUTCOME = { fail: 'failed', pass: 'passed', only: 'skipped', run: 'skipped', skip: 'skipped',
  todo: 'skipped' };

function tests(task, found) {
  if (task.type === 'test' || task.type === 'custom') found.push(task);
  for (const child of task.tasks || []) tests(child, found);
  return found;
}

function testId(file, test) {
  const ancestors = [];
  for (let suite = test.suite; suite; suite = suite.suite) ancestors.push(String(suite.name));
  ancestors.reverse();
  const parts = [file].concat(ancestors).filter(Boolean); // an empty title stays, as in ids.py
  return parts.concat([String(test.name)]).map(escape).join(' > ');
}

const GUARD = path.join(__dirname, 'trajforge_guard.js');

class TrajforgeVitestReporter {
  // Before any file runs: the grader's guard appended to every project's setupFiles (vitest's
  // command line has no option for them), so it runs in each test file's worker after the
  // project's own setup files.
  onInit(ctx) {
    for (const config of [ctx.config].concat((ctx.projects || []).map((p) => p.config))) {
      if (!config) continue;
      const own = Array.isArray(config.setupFiles) ? config.setupFiles : [];
      if (!own.includes(GUARD)) config.setupFiles = own.concat([GUARD]);
    }
  }

  // vitest 3+ ends a run with onTestRunEnd (its modules hold the runner's tasks), vitest 4 only
  // with it; before 3, onFinished. The first one heard reports.
  onTestRunEnd(modules) {
    this.report((modules || []).map((module) => module.task).filter(Boolean));
  }

  onFinished(files) {
    this.report(files);
  }

  report(files) {
    if (this.sent) return;
    this.sent = true;
    const worst = new Map();
    for (const file of files || []) {
      const name = relative(file.filepath);
      let failed = false;
      for (const test of tests(file, [])) {
        const state = (test.result && test.result.state) || test.mode;
        const outcome = OUTCOME[state] || 'skipped';
        failed = failed || outcome === 'failed';
        const id = testId(name, test);
        keepWorst(worst, RANK, id, outcome);
      }
      if (file.result && file.result.state === 'fail' && !failed) {
        send({ t: 'collect_error', id: name });
      }
    }
    for (const [id, outcome] of worst) {
      send({ t: 'report', id, when: 'call', outcome, xfail: false, sub: false });
    }
    send({ t: 'finish' });
  }
}

module.exports = TrajforgeVitestReporter;
