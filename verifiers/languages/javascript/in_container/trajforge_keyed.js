// The keyed prelude of every grader reporter for node: shipped in front of each runner's
// reporter (supervised.py's `_reporter`), so the key lives in that one file's closure and no
// module exports a keyed writer a test could require.
//
// Preloaded (`node -r REPORTER ...`), it takes the records' key from its one-shot pipe before
// the runner or any project code runs, and keeps the writers it needs from that moment: a test
// that later replaces fs.writeSync or JSON.stringify changes nothing here. The variables that
// named the key and the pipe are deleted, so the processes the runner starts (where the tests
// run) are started without them. A record is `KEY {json}` on one line, written with one write;
// the supervisor keeps only keyed lines, and the host reads them by channel.py's rules.
//
// CommonJS, node's built-ins only, node 10 and later.
'use strict';

const fs = require('fs');
const path = require('path');

const writeSync = fs.writeSync;
const stringify = JSON.stringify;
const bufferFrom = Buffer.from;

const RESULT_FD = Number(process.env.TRAJFORGE_RESULT_FD || -1);
const KEY_FD = Number(process.env.TRAJFORGE_KEY_FD || -1);
// The repository (a monorepo's runner works in its package's folder): ids are its paths.
const ROOT = (process.env.TRAJFORGE_REPO || process.cwd()) + '/';
const CONTROL = /[\x00-\x1f\x7f-\x9f]/g;

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

// A part of an id with its control characters written out, as validate's reports escape them.
function escape(part) {
  return part.replace(CONTROL, (c) => '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0'));
}

// A repository path from a runner's file name (absolute, or a file:// URL).
function relative(file) {
  let said = String(file || '').replace(/^file:\/\//, '');
  if (said.startsWith(ROOT)) said = said.slice(ROOT.length);
  return said ? path.posix.normalize(said) : said;
}

// One outcome per id, the worst winning (`rank`: outcome -> its weight).
function keepWorst(worst, rank, id, outcome) {
  const old = worst.get(id);
  if (old === undefined || rank[outcome] > rank[old]) worst.set(id, outcome);
}

// --- the runner's reporter follows ---
