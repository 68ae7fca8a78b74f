// The grader's guard, loaded where a JS task's tests run before any test file or project module
// (jest: last in the project's setupFilesAfterEnv, put there by the jest reporter in the
// worker; vitest: last in its setupFiles, by the vitest reporter; node --test: required by the
// node reporter in each file's process; mocha: by the mocha reporter at preload; node-tap and
// ava: NODE_OPTIONS from their reporters).
//
// 1. It fixes the test framework's globals (expect, test, it, describe, the hooks...) and
//    node:assert, assert.strict, node:assert/strict and node:test: non-writable and
//    non-configurable, so a one-line forgery in the module under test (`globalThis.expect = a
//    no-op Proxy`, a `test` that swallows failures, `assert.strictEqual = () => {}`) throws (strict
//    code) or does nothing (sloppy code); the real ones stay. jest's matchers, its state and its
//    event handlers are fixed the same way (`expect.extend({toBe})` over a built-in matcher
//    throws).
// 2. It plants the run's sentinel tests (names and outcomes drawn by the host, js_sentinels.py)
//    in the graded file's own scope, as ordinary tests of small computations; their assertion is
//    looked up when they run (global expect, `require('node:assert')`), so a bend of what the
//    graded tests use bends them too, and the host's judge marks the run forged.
//
// The sentinels' file is readable by the tests' user (this file runs as that user): code under
// test can learn them, as it can read the runner's registered tests. Sentinels catch wholesale
// bends; the freeze is what stops the targeted ones (docs/security.md says what stays open).
//
// CommonJS, node's built-ins only.
'use strict';

const fs = require('fs');
const path = require('path');

const SPEC = path.join(__dirname, 'trajforge_sentinels.json');
const REPO = (process.env.TRAJFORGE_REPO || process.cwd()) + '/';
// The globals each runner puts on globalThis (jest's, then mocha's interfaces').
const JEST_GLOBALS = [
  'expect', 'test', 'it', 'describe', 'xit', 'xtest', 'xdescribe', 'fit', 'fdescribe',
  'beforeEach', 'afterEach', 'beforeAll', 'afterAll', 'pending', 'fail', 'spyOn', 'jasmine',
];
const VITEST_GLOBALS = [
  'expect', 'test', 'it', 'describe', 'suite', 'bench', 'beforeEach', 'afterEach', 'beforeAll',
  'afterAll', 'onTestFailed', 'onTestFinished', 'vi', 'vitest', 'assert', 'chai',
];
const MOCHA_GLOBALS = [
  'describe', 'context', 'it', 'specify', 'xdescribe', 'xcontext', 'xit', 'xspecify', 'before',
  'after', 'beforeEach', 'afterEach', 'run', 'suite', 'test', 'setup', 'teardown', 'suiteSetup',
  'suiteTeardown',
];
const JEST_MATCHERS = Symbol.for('$$jest-matchers-object');
const JEST_STATE = Symbol.for('JEST_STATE_SYMBOL');
const JEST_EQUALITY = Symbol.for('$$jest-custom-equality-testers');

// `object[key]` as it is now: a value non-writable, an accessor kept (chai's `.to`, `.not`...),
// both non-configurable, so neither can be replaced, redefined or deleted.
function fix(object, key) {
  const said = Object.getOwnPropertyDescriptor(object, key);
  if (!said || !said.configurable) return;
  if ('value' in said) said.writable = false;
  said.configurable = false;
  Object.defineProperty(object, key, said);
}

// Every own property of `object` fixed; it stays extensible (expect.extend adds new matchers).
function fixAll(object) {
  if (object === null || (typeof object !== 'object' && typeof object !== 'function')) return;
  for (const key of Reflect.ownKeys(object)) {
    if (key !== 'prototype' || typeof object !== 'function') fix(object, key);
  }
}

function freezeDeep(object) {
  if (object === null || (typeof object !== 'object' && typeof object !== 'function')) return;
  if (Object.isFrozen(object)) return;
  Object.freeze(object);
  for (const key of Reflect.ownKeys(object)) {
    const said = Object.getOwnPropertyDescriptor(object, key);
    if (said && typeof said.value === 'function' && key !== 'constructor') {
      Object.freeze(said.value);
    }
  }
}

// The language's own functions the matchers call as they run, where a hook would see every
// assertion (and its caller's stack, to bend the graded ones alone): the statics of the
// built-in constructors (`Object.is`, `Object.keys`, `Array.isArray`, `Reflect.apply`...) and
// Function.prototype's call, apply and bind, Promise.prototype's then. Fixed, not frozen: code
// may still add properties. Fixed as accessors (`fixShadowable`), not as read-only values: a
// read-only inherited property refuses an assignment to an object that inherits it (the
// "override mistake"), and ordinary code makes those: express 4 gives its router a `bind`
// method for HTTP's BIND (`proto[method] = ...` on a function), code before classes sets
// `Sub.prototype.constructor`. Such an assignment makes the object's own property, as it would
// with nothing fixed; one on the intrinsic itself changes nothing.
const INTRINSICS = ['Object', 'Array', 'Number', 'String', 'Boolean', 'Symbol', 'BigInt', 'Reflect',
  'JSON', 'Math', 'Promise', 'Date', 'RegExp', 'Error', 'Map', 'Set', 'WeakMap', 'WeakSet'];
// V8's stack API is set, not called, by the libraries that use it: depd (which express and
// body-parser load) and source-map-support assign Error.prepareStackTrace to read their
// callers' frames. Node 20.19 gives Error an own prepareStackTrace, which fixing made
// read-only, so every suite that loads depd failed to load under the grader alone. Writable
// it gives code nothing it lacks: `new Error().stack` names the same callers, and an
// assertion's outcome never goes through it (a hook that throws still fails the test).
const SET_BY_LIBRARIES = { Error: ['prepareStackTrace'] };
function fixIntrinsics() {
  for (const name of INTRINSICS) {
    const object = globalThis[name];
    if (!object) continue;
    const settable = SET_BY_LIBRARIES[name] || [];
    for (const key of Reflect.ownKeys(object)) {
      const said = Object.getOwnPropertyDescriptor(object, key);
      if (said && typeof said.value === 'function' && key !== 'prototype' &&
          !settable.includes(key)) fixShadowable(object, key, object);
    }
  }
  for (const key of ['call', 'apply', 'bind']) {
    fixShadowable(Function.prototype, key, Function.prototype);
  }
  // what `await` looks up on a promise an async test returns
  for (const key of ['then', 'catch', 'finally', 'constructor']) {
    fixShadowable(Promise.prototype, key, Promise.prototype);
  }
}

// node:assert (and assert.strict, node:assert/strict) and node:test, as every require sees them.
function freezeModules(load) {
  fixIntrinsics();
  for (const name of ['assert', 'assert/strict', 'test']) {
    let module;
    try {
      module = load('node:' + name);
    } catch (error) {
      continue; // an old node: no node:test, no assert/strict
    }
    if (module && module.strict) freezeDeep(module.strict);
    freezeDeep(module);
  }
}

function fixGlobals(names) {
  for (const name of names) {
    if (globalThis[name] === undefined) continue;
    fix(globalThis, name);
    fixAll(globalThis[name]); // test.only, test.each, expect.extend, expect.not...
  }
}

// jest: the matchers and state expect reads on every call, and jest-circus's state (its event
// handlers: a handler added by the tests could rewrite a test's errors).
function fixJest() {
  fix(globalThis, JEST_MATCHERS);
  fix(globalThis, JEST_EQUALITY);
  const matchers = globalThis[JEST_MATCHERS];
  if (matchers) {
    fixAll(matchers);
    fixAll(matchers.matchers);
  }
  fix(globalThis, JEST_STATE);
  const state = globalThis[JEST_STATE];
  if (state && Array.isArray(state.eventHandlers)) {
    fix(state, 'eventHandlers');
    Object.freeze(state.eventHandlers);
  }
}

// The sentinels of `file` (a repository path), from the host's file; [] when none.
function sentinelsOf(file) {
  let said;
  try {
    said = JSON.parse(fs.readFileSync(SPEC, 'utf8'));
  } catch (error) {
    return [];
  }
  const mine = said && said[file];
  return Array.isArray(mine) ? mine : [];
}

function relative(file) {
  const said = String(file || '');
  return said.startsWith(REPO) ? said.slice(REPO.length) : said;
}

// One sentinel's body: a small computation checked as the graded tests check theirs, by
// `check` (jest's expect or node:assert, looked up when the sentinel runs).
function body(one, check) {
  const kind = Number(one.kind);
  const a = Number(one.a);
  const b = Number(one.b);
  const c = Number(one.c);
  const want = one.want;
  const deep = kind === 0;
  return function sentinel() {
    let got;
    if (kind === 0) got = [a, b, c].sort((x, y) => x - y);
    else if (kind === 1) got = String(one.word).toUpperCase();
    else if (kind === 2) got = Array.from({ length: a }, (_, i) => i).reduce((s, i) => s + i, 0);
    else got = a * b;
    check(got, want, deep);
  };
}

// jest's expect, as the graded tests find it when they run
function withExpect(got, want, deep) {
  if (deep) globalThis.expect(got).toEqual(want);
  else globalThis.expect(got).toBe(want);
}

// node:assert, as a require made when the sentinel runs finds it: one made for the test file
// (`createRequire`), so a Module._load hook sees the graded file as the requiring module
function fromFile(file) {
  try {
    return require('module').createRequire(String(file));
  } catch (error) {
    return require;
  }
}

function withAssert(load) {
  return function check(got, want, deep) {
    const assert = load('node:assert');
    if (deep) assert.deepStrictEqual(got, want);
    else assert.strictEqual(got, want);
  };
}

function plant(register, file, check) {
  for (const one of sentinelsOf(file)) register(String(one.name), body(one, check));
}

// jest: this file is a setup file (setupFilesAfterEnv), run in each test file's context.
function jest() {
  const state = globalThis.expect.getState() || {};
  const jasmine = globalThis.jasmine || {};
  const file = state.testPath || jasmine.testPath; // jest-circus's, jest-jasmine2's
  freezeModules(require);
  fixGlobals(JEST_GLOBALS);
  fixJest();
  if (file) plant(globalThis.test, relative(file), withExpect);
}

// node --test: called in a test file's own process, before the file loads.
function node(file) {
  const load = require;
  freezeModules(load);
  const runner = load('node:test');
  // node names a test's file by where test() was called: called from code named as the file
  const register = require('vm').runInThisContext('(test) => (name, fn) => test(name, fn)', {
    filename: String(file),
  })(runner.test);
  plant(register, relative(file), withAssert(fromFile(file)));
}

// mocha's Suite: lib/suite.js of the mocha package holding `program` (bin/_mocha in mocha's
// process, lib/nodejs/worker.js in a --parallel worker); null when there is none.
function mochaSuite(program) {
  let folder;
  try {
    folder = path.dirname(fs.realpathSync(String(program)));
  } catch (error) {
    return null;
  }
  for (; folder !== path.dirname(folder); folder = path.dirname(folder)) {
    const suite = path.join(folder, 'lib', 'suite.js');
    if (path.basename(folder) === 'mocha' && fs.existsSync(suite)) return require(suite);
  }
  return null;
}

// mocha: in mocha's process (the mocha reporter calls this at preload) and in its --parallel
// workers (NODE_OPTIONS from the reporter); mocha sets its globals anew before each file
// (`pre-require`), so they are accessors that take mocha's values there and nothing else.
let mochaGuarded = false;
function mocha(program) {
  const Suite = mochaGuarded ? null : mochaSuite(program);
  if (!Suite) return;
  mochaGuarded = true;
  freezeModules(require);
  const current = Object.create(null);
  let open = false;
  for (const name of MOCHA_GLOBALS) {
    const said = Object.getOwnPropertyDescriptor(globalThis, name);
    if (said && !said.configurable) continue;
    current[name] = globalThis[name];
    Object.defineProperty(globalThis, name, {
      get() { return current[name]; },
      set(value) { if (open) current[name] = value; },
      enumerable: true,
      configurable: false,
    });
  }
  const emit = Suite.prototype.emit;
  Object.defineProperty(Suite.prototype, 'emit', {
    value: function guardedEmit(event, context, file) {
      if (event !== 'pre-require' || this.parent) return emit.apply(this, arguments);
      open = true;
      let result;
      try {
        result = emit.apply(this, arguments);
      } finally {
        open = false;
      }
      for (const name of MOCHA_GLOBALS) fixAll(current[name]);
      const register = current.it || current.test; // bdd, else tdd/qunit
      if (typeof register === 'function') {
        plant(register, relative(file), withAssert(fromFile(file)));
      }
      return result;
    },
    writable: false,
    configurable: false,
  });
}

// vitest: this file is a setup file (appended by the vitest reporter), run in each test file's
// worker before the file is collected; vitest's module (expect, test, chai) is
// `globalThis.__vitest_index__`, which vitest defines non-writable.
function vitest(index) {
  freezeModules(require);
  fixGlobals(VITEST_GLOBALS); // where the configuration asks for globals
  fixAll(index.expect);
  fixAll(index.expect && index.expect.not);
  if (index.chai && index.chai.Assertion) {
    fixAll(index.chai.Assertion); // addMethod, overwriteMethod...
    fixAll(index.chai.Assertion.prototype); // toBe, toEqual... as chai methods
    fixAll(index.chai.util); // flag, addMethod...: the matchers call them through it
  }
  fixJest(); // vitest keeps its matchers and their state where jest does
  const worker = globalThis.__vitest_worker__ || {};
  const file = worker.filepath || (index.expect.getState() || {}).testPath;
  const check = (got, want, deep) => {
    const expect = globalThis.__vitest_index__.expect;
    if (deep) expect(got).toEqual(want);
    else expect(got).toBe(want);
  };
  plant(index.test, relative(file), check);
}

// node-tap (before 18): in each test file's process (NODE_OPTIONS from the tap reporter), node:assert
// fixed now and node-tap's Test class (its assertions: `t.equal`, `t.ok`, `t.pass`...) the moment
// the test file requires it. No sentinels: node-tap reads a file's TAP from that file's own
// stdout, with no per-file hook the grader could plant tests through.
function tapChild() {
  freezeModules(require);
  const Module = require('module');
  const load = Module._load;
  Module._load = function loadFixingTap(request) {
    const loaded = load.apply(this, arguments);
    if ((request === 'tap' || request === 'libtap') && loaded && typeof loaded.Test === 'function') {
      const stop = require('events').EventEmitter.prototype;
      for (let proto = loaded.Test.prototype; proto && proto !== stop && proto !== Object.prototype;
        proto = Object.getPrototypeOf(proto)) {
        for (const key of Reflect.ownKeys(proto)) {
          if (key !== 'constructor') fixShadowable(proto, key, loaded);
        }
      }
      fixAll(loaded.Test);
      // the TAP object's own copies of Test's methods (bound, for `const { test } = require('tap')`);
      // node-tap itself reassigns others on it (its stream's `pipe`)
      const own = Object.getOwnPropertyNames(loaded.Test.prototype);
      for (const key of Reflect.ownKeys(loaded)) {
        if (own.includes(key) && typeof loaded[key] === 'function') fix(loaded, key);
      }
    }
    return loaded;
  };
}

// `proto[key]` fixed against replacement while the objects that inherit it may still set their
// own (node-tap's constructor assigns some of Test's methods; express sets a router's `bind`: a
// non-writable one there would throw): an assignment through an heir defines the heir's own
// property, except on `root` (node-tap's exported TAP object, which the tests' code holds); one
// on `proto` itself is ignored. Reads get the value `proto[key]` had.
function fixShadowable(proto, key, root) {
  const said = Object.getOwnPropertyDescriptor(proto, key);
  if (!said || !said.configurable || !('value' in said)) return;
  const value = said.value;
  Object.defineProperty(proto, key, {
    get() { return value; },
    set(replacement) {
      if (this === proto || this === root) return;
      Object.defineProperty(this, key, {
        value: replacement, writable: true, enumerable: true, configurable: true,
      });
    },
    enumerable: said.enumerable,
    configurable: false,
  });
}

module.exports = { node, mocha };

if (globalThis.__vitest_index__ && typeof globalThis.__vitest_index__.test === 'function') {
  vitest(globalThis.__vitest_index__);
} else if (typeof globalThis.expect === 'function'
    && typeof globalThis.expect.getState === 'function' && typeof globalThis.test === 'function') {
  jest();
} else if (process.env.TAP_CHILD_ID && process.env.TRAJFORGE_GUARD === 'tap') {
  tapChild();
} else if (process.env.TRAJFORGE_GUARD === 'mocha') {
  mocha(process.argv[1]); // a --parallel worker of mocha's
} else if (process.env.TRAJFORGE_GUARD === 'ava') {
  freezeModules(require); // ava's processes: no sentinels (one ava per file, no per-file hook)
}
