import { createServer } from 'node:net';
import test from 'ava';
import { spawnCli, tempDir } from '../helpers/serverProcess.js';

test('--metrics-port outside 0-65535 is a usage error (exit 2)', async (t) => {
  const dir = await tempDir(t);
  const server = spawnCli(t, ['--port', '0', '--listen', '127.0.0.1', '--metrics-port', '70000'], dir);
  const exit = await server.waitForExit();
  t.is(exit.code, 2);
  t.regex(server.stderr, /metrics-port/);
});

test('a metrics port already taken stops the start (exit 1) with a message naming it', async (t) => {
  const dir = await tempDir(t);
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => taken.close());
  const port = (taken.address() as { port: number }).port;
  const server = spawnCli(t, ['--port', '0', '--listen', '127.0.0.1', '--metrics-port', String(port)], dir);
  const exit = await server.waitForExit();
  t.is(exit.code, 1);
  t.regex(server.stderr, new RegExp(`cannot serve metrics on 127\\.0\\.0\\.1:${port}`));
  t.false(server.stderr.includes('event=started'));
});

test('without --metrics-port nothing is served and no metrics line is logged', async (t) => {
  const dir = await tempDir(t);
  const server = spawnCli(t, ['--port', '0', '--listen', '127.0.0.1'], dir);
  await server.event('started');
  t.is(server.eventsNamed('metrics-started').length, 0);
});
