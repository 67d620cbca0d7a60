import { createServer, type Socket } from 'node:net';
import test from 'ava';
import { lockctl } from '../helpers/lockctl.js';
import { startServer } from '../helpers/serverProcess.js';

test('exit 2 on a bad command line, with a one-line message', async (t) => {
  for (const args of [
    ['--port', '70000', 'stats'],
    ['--port', 'x', 'stats'],
    ['--timeout', '0', 'stats'],
    ['owner', 'only-a-key'],
    ['no-such-subcommand'],
    ['request', 'k', 'i', 'o', '--priority', '256'],
    ['request', 'k', 'i', 'o', '--ttl', '-1'],
    ['owner', 'x'.repeat(256), 'i'],
    ['hold', 'k', 'i', 'o'],
    ['watch', 'k', '--count', 'many'],
  ]) {
    const run = await lockctl(args);
    t.is(run.code, 2, args.join(' '));
    t.is(run.stdout, '');
    t.is(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
  }
  t.like(await lockctl(['--help']), { code: 0 });
  const help = await lockctl(['--help']);
  t.regex(help.stdout, /Exit codes:/);
});

test('exit 3 when nothing listens on the port', async (t) => {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const run = await lockctl(['-p', String(port), 'stats']);
  t.is(run.code, 3);
  t.regex(run.stderr, /^lockctl: cannot connect to 127\.0\.0\.1:\d+: .*ECONNREFUSED/);
});

test('exit 3 when the server refuses us (greeting 0x00), naming both possible reasons', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.2\n' });
  const run = await lockctl(['-p', String(server.port), 'stats']);
  t.is(run.code, 3);
  t.regex(run.stderr, /refused: not in hosts file or too busy/);
});

test('exit 4 when the server does not answer within --timeout', async (t) => {
  const sockets: Socket[] = [];
  const greetsOnly = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
    socket.write(Buffer.from([0x01]));
  });
  const silent = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
  });
  for (const server of [greetsOnly, silent]) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    greetsOnly.close();
    silent.close();
  });
  const port = (server: typeof silent): string => String((server.address() as { port: number }).port);

  const noReply = await lockctl(['-p', port(greetsOnly), '--timeout', '0.2', 'stats']);
  t.is(noReply.code, 4);
  t.regex(noReply.stderr, /no reply to stats within 200 ms/);
  const noGreeting = await lockctl(['-p', port(silent), '--timeout', '0.2', 'owner', 'k', 'i']);
  t.is(noGreeting.code, 4);
  t.regex(noGreeting.stderr, /no greeting from 127\.0\.0\.1:\d+ within 200 ms/);
});
