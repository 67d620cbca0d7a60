import test from 'ava';
import { execFile } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../src/packageRoot.js';
import { bounded } from '../helpers/bounded.js';
import { startServer } from '../helpers/serverProcess.js';

// The README's first lock, walked as a newcomer would on a fresh build: its netcat line, its lockctl
// lines and its library snippet, against a real server, each checked against what the README says it
// prints. A README that drifts from the code fails here. The server runs on a free port instead of
// 7734, and a fencing token (different every run) is compared as `N`.

const run = promisify(execFile);
const LOCKCTL = join(PACKAGE_ROOT, 'dist', 'src', 'cli', 'lockctl.js');
const STEP_MS = 20_000;

/** Runs `command` with /bin/sh; its stdout, whatever its exit status (lockctl exits 1 for a "no"). */
function shell(command: string): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile('/bin/sh', ['-c', command], { timeout: STEP_MS }, (error, stdout) => {
      // A number is the exit status; anything else (a signal, a timeout, no shell) is a failure.
      if (error !== null && typeof error.code !== 'number') reject(new Error(`${command}: ${error.message}`, { cause: error }));
      else resolve(stdout);
    }),
  );
}

/** The code blocks of the README's "A first lock" section, in order, each with its language. */
async function firstLockBlocks(): Promise<Array<{ lang: string; body: string }>> {
  const readme = await readFile(join(PACKAGE_ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('\n## A first lock\n');
  const end = readme.indexOf('\n## ', start + 1);
  if (start < 0 || end < 0) throw new Error('README.md has no "## A first lock" section');
  const section = readme.slice(start, end);
  return [...section.matchAll(/```(\w*)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1]!, body: m[2]! }));
}

/** The bytes a shell `printf 'FORMAT'` writes, for a format of plain characters and \xHH escapes. */
function printfBytes(format: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < format.length; i++) {
    if (format[i] === '\\' && format[i + 1] === 'x') {
      bytes.push(parseInt(format.slice(i + 2, i + 4), 16));
      i += 3;
    } else {
      bytes.push(format.charCodeAt(i));
    }
  }
  return Buffer.from(bytes);
}

/** Sends `bytes`, half-closes (as `nc -N`), and gives back everything the server sent until it closed. */
function exchange(port: number, bytes: Buffer): Promise<Buffer> {
  return bounded(
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      const socket = connect({ host: '127.0.0.1', port }, () => socket.end(bytes));
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks)));
    }),
    STEP_MS,
    'the netcat exchange',
  );
}

const withTokens = (text: string): string => text.replace(/token \d+/g, 'token N');

test("the README's first lock runs as written: its netcat line, its lockctl lines and its library snippet print what it says", async (t) => {
  t.timeout(90_000);
  const blocks = await firstLockBlocks();
  const [netcat, lockctl, library] = [blocks[0], blocks[1], blocks.find((b) => b.lang === 'js')];
  if (netcat === undefined || lockctl === undefined || library === undefined) return t.fail(`expected three code blocks, found ${blocks.length}`);
  const server = await startServer(t);

  // netcat: the printf's bytes, and the hex of the xxd line the README shows after it.
  const printf = /printf '([^']*)' \| nc -N 127\.0\.0\.1 7734/.exec(netcat.body);
  const shown = /^# 00000000: ([0-9a-f ]+?)\s{2,}/m.exec(netcat.body);
  if (printf === null || shown === null) return t.fail(`no printf line and xxd line in:\n${netcat.body}`);
  t.is((await exchange(server.port, printfBytes(printf[1]!))).toString('hex'), shown[1]!.replace(/ /g, ''), 'the netcat reply');

  // lockctl: each line run by the shell, `npx lockctl` being the built CLI aimed at this server.
  const lines = lockctl.body.split('\n').filter((line) => line.startsWith('npx lockctl '));
  t.true(lines.length >= 4, 'the README shows lockctl lines');
  for (const line of lines) {
    const hash = line.lastIndexOf('   # ');
    const command = line
      .slice(0, hash)
      .trim()
      .replace(/^npx lockctl /, `node '${LOCKCTL}' --port ${server.port} `);
    const expected = line.slice(hash + 5).trim();
    t.is(withTokens((await shell(command)).trim()), expected, line);
  }

  // The library snippet, as an ES module inside the package (so `from 'lockserver'` resolves to it).
  const snippet = join(PACKAGE_ROOT, 'dist', `readme-snippet-${process.pid}.mjs`);
  await writeFile(snippet, library.body.replace('port: 7734', `port: ${server.port}`));
  t.teardown(() => rm(snippet, { force: true }));
  const { stdout } = await run(process.execPath, [snippet], { timeout: STEP_MS });
  t.regex(stdout, /^carol (owns users\/42|is at position \d+)$/m);
  t.regex(stdout, /^the job runs$/m);
});
