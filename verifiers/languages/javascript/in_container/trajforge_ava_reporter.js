// The grader's ava run: one ava per graded file, each file's TAP keyed on the supervisor's pipe.
//
// ava has no reporter a program can name, and writes a single file's titles without the file
// (validate runs it once per file for that), so this is a small driver, not a plugin: node runs
// it (`node THIS AVA_CLI OPTIONS -- FILES`) as the supervisor's child, and it takes the records'
// key at load (the keyed prelude in front of it) before any project code exists. No test runs in
// this process: it starts one ava per file in turn, each with `--tap` and, on ava 4+,
// `--no-worker-threads` (tests in child processes, never threads sharing ava's own process).
// ava's stdout (its TAP) comes here on a socket only that ava holds (a socket cannot be opened
// through /proc, a pipe of the tests' user could); ava hands a test process's own output to its
// stderr, which goes to the log. Each chunk is sent as it arrives, numbered, with its file:
// the host prefixes the file as validate does and reads the text with validate's TAP parser
// (verifiers/grader/tap_runs.py). `finish` after the last file; the exit code is 1 when any
// ava failed (validate's `|| rc=1`).
//
// Shipped after trajforge_keyed.js (the key, `send`).
const { spawn } = require('child_process');
const { StringDecoder } = require('string_decoder');

const echo = process.stdout.write.bind(process.stdout);
const said = process.argv.slice(2);
const cut = said.indexOf('--');
const AVA = cut < 0 ? said : said.slice(0, cut);
const FILES = cut < 0 ? [] : said.slice(cut + 1);
let chunks = 0;
let failed = false;

function runFile(index) {
  if (index >= FILES.length) {
    send({ t: 'finish' });
    process.exitCode = failed ? 1 : 0;
    return;
  }
  const file = FILES[index];
  const decoder = new StringDecoder('utf8');
  const tap = (text) => { if (text) send({ t: 'tap', n: chunks++, file, text }); };
  let done = false;
  const next = (ok) => {
    if (done) return;
    done = true;
    tap(decoder.end());
    if (!ok) failed = true;
    runFile(index + 1);
  };
  const ava = spawn(process.execPath, [...AVA, file], { stdio: ['ignore', 'pipe', 'inherit'] });
  ava.stdout.on('data', (chunk) => { echo(chunk); tap(decoder.write(chunk)); });
  ava.on('error', () => next(false));
  ava.on('close', (code) => next(code === 0));
}

// ava and its workers (where the tests run) load the grader's guard first (trajforge_guard.js:
// node:assert fixed before any test file; ava's own assertions live in its ES modules, out of
// the tests' reach as a property to replace).
const GUARD = path.join(__dirname, 'trajforge_guard.js');
const OWN = process.env.NODE_OPTIONS ? process.env.NODE_OPTIONS + ' ' : '';
process.env.NODE_OPTIONS = OWN + '--require "' + GUARD.replace(/(["\\])/g, '\\$1') + '"';
process.env.TRAJFORGE_GUARD = 'ava';

runFile(0);
