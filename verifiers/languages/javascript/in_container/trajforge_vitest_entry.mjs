// What vitest is given as its reporter: the preloaded trajforge_vitest_reporter.js from node's
// own module cache (vitest's module runner would load a second instance, without the key).
import { createRequire } from 'module';

const load = createRequire(import.meta.url);
export default load('./trajforge_vitest_reporter.js');
