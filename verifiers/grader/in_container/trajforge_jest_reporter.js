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
// CommonJS, node's built-ins only, node 10 and later.
'use strict';

const fs = require('fs');
const path = require('path');

// Taken at preload, before any project code: a test running in this process (jest runs a
// single file in band) that replaces fs.writeSync or JSON.stringify later changes nothing here.
const writeSync = fs.writeSync;
const stringify = JSON.stringify;
const bufferFrom = Buffer.from;

const RESULT_FD = Number(process.env.TRAJFORGE_RESULT_FD || -1);
const KEY_FD = Number(process.env.TRAJFORGE_KEY_FD || -1);
const ROOT = process.cwd();
const RANK = { passed: 0, skipped: 1, failed: 2 };
const OUTCOME = {
  passed: 'passed', focused: 'passed', failed: 'failed',
  pending: 'skipped', skipped: 'skipped', todo: 'skipped', disabled: 'skipped',
};

let key = '';
if (KEY_FD >= 0) {
  try {
    const buffer = Buffer.alloc(256);
    const size = fs.readSync(KEY_FD, buffer, 0, buffer.length, null);
    key = buffer.toString('utf8', 0, size).trim();
  } catch (error) {
    key = '';
  }
  try { fs.closeSync(KEY_FD); } catch (error) { /* already closed */ }
}
delete process.env.TRAJFORGE_KEY_FD;
delete process.env.TRAJFORGE_RESULT_FD;

function send(record) {
  if (RESULT_FD < 0 || !key) return;
  let data = bufferFrom(key + ' ' + stringify(record) + '\n', 'utf8');
  while (data.length) data = data.slice(writeSync(RESULT_FD, data));
}

function testId(file, ancestors, title) {
  const parts = [file].concat((ancestors || []).filter(Boolean), [title]);
  return parts.join(' > ');
}

class TrajforgeJestReporter {
  onTestResult(test, result) {
    const file = path.relative(ROOT, result.testFilePath).split(path.sep).join('/');
    if (result.testExecError) send({ t: 'collect_error', id: file });
    const worst = new Map(); // one record per id: a title repeated in a file, the worst wins
    for (const one of result.testResults || []) {
      const id = testId(file, one.ancestorTitles, String(one.title));
      const outcome = OUTCOME[one.status] || 'failed';
      const old = worst.get(id);
      if (old === undefined || RANK[outcome] > RANK[old]) worst.set(id, outcome);
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
