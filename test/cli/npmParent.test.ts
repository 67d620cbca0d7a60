import test from 'ava';
import { bounded } from '../helpers/bounded.js';
import { ancestryIntact, npmAncestry, procTable, startedByNpm, watchNpmParent, type ProcessTable } from '../../src/cli/npmParent.js';

/** A process table of pid → [parent, command line]; what it lacks reads as gone. */
function table(processes: Record<number, [number, string[]]>): ProcessTable & { processes: typeof processes } {
  return {
    processes,
    parentOf: async (pid) => processes[pid]?.[0],
    commandLine: async (pid) => processes[pid]?.[1],
  };
}

const SHELL = 1000;
const NPM_START = 100;
const NPX = 200;
const npxTree = (): ReturnType<typeof table> =>
  table({
    [SHELL]: [1, ['bash']],
    [NPX]: [SHELL, ['npm exec lockserver --port 7735']],
    300: [NPX, ['sh', '-c', 'lockserver --port 7735']],
  });

test('started by npm: npm_lifecycle_event is set for npm start and npx alike', (t) => {
  t.true(startedByNpm({ npm_lifecycle_event: 'start' }));
  t.true(startedByNpm({ npm_lifecycle_event: 'npx' }));
  t.false(startedByNpm({}));
});

test('the chain up to npm: npm itself under npm start, the shell and npm under npx', async (t) => {
  t.deepEqual(await npmAncestry(table({ [NPM_START]: [SHELL, ['npm start']], [SHELL]: [1, ['bash']] }), NPM_START), [NPM_START]);
  t.deepEqual(await npmAncestry(npxTree(), 300), [300, NPX]);
  // npm without its process title: its script's name.
  t.deepEqual(await npmAncestry(table({ 5: [1, ['/usr/bin/node', '/usr/lib/node_modules/npm/bin/npm-cli.js', 'start']] }), 5), [5]);
  // No npm among the nearest ancestors, or nothing readable: the parent alone.
  t.deepEqual(await npmAncestry(table({ [SHELL]: [1, ['bash']] }), SHELL), [SHELL]);
  t.deepEqual(await npmAncestry(table({}), 42), [42]);
});

test('the chain breaks when the parent changes, or when npm dies above the shell (its parent changes)', async (t) => {
  const tree = npxTree();
  const chain = await npmAncestry(tree, 300);
  t.true(await ancestryIntact(tree, 300, chain));
  t.false(await ancestryIntact(tree, 1, chain), 'the shell died: this process was reparented');
  tree.processes[300] = [1, ['sh', '-c', 'lockserver --port 7735']];
  t.false(await ancestryIntact(tree, 300, chain), 'npm died (SIGHUP): the shell was reparented');
  delete tree.processes[300];
  t.false(await ancestryIntact(tree, 300, chain), 'the shell is gone altogether');
});

test('watchNpmParent calls back once the chain breaks', async (t) => {
  const tree = npxTree();
  let parent = 300;
  const gone = new Promise<void>((resolve) => watchNpmParent(resolve, { table: tree, parent: () => parent, intervalMs: 5 }));
  parent = 1;
  // The watch's timer does not hold the process up; bounded()'s does, while the test waits.
  await bounded(gone, 5_000, 'the watch to see the parent change');
  t.pass();
});

test('the /proc table reads this process: its parent and its command line', async (t) => {
  if ((await procTable.parentOf(process.pid)) === undefined) return t.pass('no /proc here');
  t.is(await procTable.parentOf(process.pid), process.ppid);
  t.is((await procTable.commandLine(process.pid))?.[0], process.argv0);
});
