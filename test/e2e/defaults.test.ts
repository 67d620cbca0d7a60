import test from 'ava';
import { spawn } from 'node:child_process';
import { realpath } from 'node:fs/promises';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { dirname, join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/packageRoot.js';
import { bounded } from '../helpers/bounded.js';
import { CLI_PATH, DEFAULT_WAIT_MS, spawnCli, tempDir } from '../helpers/serverProcess.js';

// README: with no options the server listens on every interface (`::` where IPv6 exists), port
// 7734, admits what the shipped `hosts` file lists, and keeps ./lockserver.locks and
// ./lockserver.stats in its working directory. Checked on a real process started from a temp dir.

const DEFAULT_PORT = 7734;

function ipv6Available(): boolean {
  return Object.values(networkInterfaces()).some((addresses) => (addresses ?? []).some((a) => a.family === 'IPv6'));
}

/** Whether something already answers on 127.0.0.1:7734 (then the default port cannot be tried). */
function portAnswers(port: number): Promise<boolean> {
  return bounded(
    new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    }),
    DEFAULT_WAIT_MS,
    `a connection attempt to port ${port}`,
  );
}

test('--help names 7734 as the default port', async (t) => {
  const child = spawn(process.execPath, [CLI_PATH, '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
  const code = await bounded(new Promise<number | null>((resolve) => child.once('close', resolve)), DEFAULT_WAIT_MS, 'lockserver --help');
  t.is(code, 0);
  t.regex(out, /-p, --port <n>[^-]*\(default: 7734\)/);
});

test('without options: the shipped hosts file, ./lockserver.locks and ./lockserver.stats, every interface, port 7734', async (t) => {
  const dir = await realpath(await tempDir(t));
  const portFree = !(await portAnswers(DEFAULT_PORT));
  if (!portFree) t.log(`port ${DEFAULT_PORT} is in use here: the default port is checked through --help only`);
  const server = spawnCli(t, portFree ? [] : ['--port', '0'], dir);
  let started;
  try {
    started = await server.event('started', () => true, 15_000);
  } catch (error) {
    if (portFree && /EADDRINUSE/.test(server.stderr)) {
      t.log(`port ${DEFAULT_PORT} was taken meanwhile; not checked here`);
      t.pass();
      return;
    }
    throw error;
  }
  const fields = started.fields;
  t.is(fields.hosts_file, join(PACKAGE_ROOT, 'hosts'));
  t.true(fields.hosts_file!.endsWith('/hosts'));
  t.is(fields.lock_file, join(dir, 'lockserver.locks'));
  t.is(dirname(fields.stat_file!), dir);
  t.is(fields.stat_file, join(dir, 'lockserver.stats'));
  if (portFree) t.is(fields.port, String(DEFAULT_PORT));
  if (ipv6Available()) t.is(fields.address, '::');
  else t.log(`no IPv6 here; the server bound ${fields.address}`);
  server.signal('SIGTERM');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
  t.like(server.eventsNamed('locks-saved')[0]?.fields, { file: join(dir, 'lockserver.locks') });
});
