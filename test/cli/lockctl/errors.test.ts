import { createServer, type Socket } from 'node:net';
import test from 'ava';
import { lockctl } from '../../helpers/lockctl.js';
import { startServer } from '../../helpers/serverProcess.js';
import { stalledPort } from '../../helpers/stalledListener.js';

test('exit 2 on a bad command line, with a one-line message', async (t) => {
  for (const args of [
    ['--port', '70000', 'stats'],
    ['--port', 'x', 'stats'],
    ['--port', '0', 'stats'],
    ['--port', '-1', 'stats'],
    ['--timeout', '0', 'stats'],
    ['owner', 'only-a-key'],
    ['no-such-subcommand'],
    ['request', 'k', 'i', 'o', '--priority', '256'],
    ['request', 'k', 'i', 'o', '--ttl', '-1'],
    ['owner', 'x'.repeat(256), 'i'],
    ['hold', 'k', 'i', 'o', '-c', 'true', '--', 'true'],
    ['hold', 'k', 'i', 'o', '-E', '256', '-c', 'true'],
    ['watch', 'k', '--count', 'many'],
  ]) {
    const run = await lockctl(args);
    t.is(run.code, 2, args.join(' '));
    t.is(run.stdout, '');
    t.is(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
  }
  const ranges = await lockctl(['-p', '0', 'stats']);
  t.regex(ranges.stderr, /0 is not between 1 and 65535/);
  t.regex((await lockctl(['-p', '-1', 'stats'])).stderr, /-1 is not between 1 and 65535/);
  t.like(await lockctl(['--help']), { code: 0 });
  const help = await lockctl(['--help']);
  t.regex(help.stdout, /Exit codes:/);
});

/** A loopback port nothing listens on (it was free a moment ago). */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

test('exit 3 when nothing listens on the port', async (t) => {
  const port = await freePort();
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
  t.is(noGreeting.stderr, `lockctl: connected to 127.0.0.1:${port(silent)}, but no greeting within 200 ms\n`);
});

test('exit 4 when the TCP connection itself never completes, saying so', async (t) => {
  const port = await stalledPort(t);
  const run = await lockctl(['-p', String(port), '--timeout', '0.2', 'stats']);
  t.is(run.code, 4);
  t.is(run.stderr, `lockctl: no TCP connection to 127.0.0.1:${port} within 200 ms\n`);
});

test('lockctl with no subcommand: the usage line and a hint on stderr, exit 2, not the whole help', async (t) => {
  for (const args of [[], ['--json'], ['-p', '7734']]) {
    const run = await lockctl(args);
    t.is(run.code, 2);
    t.is(run.stdout, args.includes('--json') ? '{"error":"no subcommand given","exitCode":2}\n' : '');
    t.is(run.stderr, "Usage: lockctl [options] <subcommand> …\nlockctl: no subcommand given; 'lockctl --help' lists them and the options\n");
  }
});

test('with --json an error is also one object on stdout, beside the message on stderr', async (t) => {
  const port = await freePort();
  const unreachable = await lockctl(['-p', String(port), '--json', 'owner', 'k', 'i']);
  t.is(unreachable.code, 3);
  const message = unreachable.stderr.replace(/^lockctl: /, '').trimEnd();
  t.regex(message, /^cannot connect to 127\.0\.0\.1:\d+: .*ECONNREFUSED/);
  t.deepEqual(JSON.parse(unreachable.stdout), { error: message, exitCode: 3 });

  const usage = await lockctl(['--json', '--port', '70000', 'stats']);
  t.is(usage.code, 2);
  t.deepEqual(JSON.parse(usage.stdout), { error: "option '-p, --port <n>' argument '70000' is invalid. 70000 is not between 1 and 65535.", exitCode: 2 });
  t.regex(usage.stderr, /70000 is not between 1 and 65535/);
  // After `--` it is hold's command's argument, not lockctl's option.
  t.is((await lockctl(['hold', 'k', 'i', 'o', '-c', 'true', '--', '--json'])).stdout, '');
});
