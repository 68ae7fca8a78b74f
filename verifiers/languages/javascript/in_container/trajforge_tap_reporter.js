// The grader's node-tap reporter: the TAP node-tap's own process writes, keyed on the
// supervisor's pipe as it is written, then `finish` when that process exits.
//
// node-tap has no reporter API of its own (`--reporter=tap` pipes its root TAP stream to
// stdout), so this is preloaded (`node -r THIS node_modules/tap/bin/run.js --reporter=tap
// --no-coverage ...`): it takes the records' key (the keyed prelude in front of it) before
// node-tap or any project code runs, and wraps this process's `process.stdout.write`, through
// which node-tap's stream writes its report. No test runs in this process: node-tap runs each
// test file as a child process (`--no-coverage`: never re-run under nyc, which would move the
// runner into a child), whose stdout node-tap reads as that file's TAP and writes again,
// indented, under the file. The host reads the joined chunks with validate's TAP parser
// (verifiers/grader/tap_runs.py). In node-tap's children (no key) this file does nothing.
//
// Shipped after trajforge_keyed.js (the key, `send`).
const { StringDecoder } = require('string_decoder');

if (key) {
  const stdout = process.stdout;
  const original = stdout.write;
  const decoder = new StringDecoder('utf8');
  let chunks = 0;
  const tap = (text) => { if (text) send({ t: 'tap', n: chunks++, file: '', text }); };
  stdout.write = function write(chunk, encoding, callback) {
    tap(typeof chunk === 'string' ? chunk : decoder.write(chunk));
    return original.call(stdout, chunk, encoding, callback);
  };
  process.once('exit', () => {
    tap(decoder.end());
    send({ t: 'finish' });
  });
  // node-tap's children (each test file's process) load the grader's guard first
  // (trajforge_guard.js: node:assert and node-tap's assertions fixed before the file's code).
  const guard = path.join(__dirname, 'trajforge_guard.js');
  const own = process.env.NODE_OPTIONS ? process.env.NODE_OPTIONS + ' ' : '';
  process.env.NODE_OPTIONS = own + '--require "' + guard.replace(/(["\\])/g, '\\$1') + '"';
  process.env.TRAJFORGE_GUARD = 'tap';
}
