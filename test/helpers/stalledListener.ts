import { spawn } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import type { ExecutionContext } from 'ava';
import { bounded } from './bounded.js';
import { DEFAULT_WAIT_MS } from './serverProcess.js';

/** Connections queued by the kernel for a listener with backlog 1 (Linux: backlog + 1). */
const QUEUED = 2;
/** Fillers sent ahead of the test's own connection, so that spare queue room is taken first. */
const FILLERS = 8;

/**
 * A port on 127.0.0.1 whose TCP handshake never completes: a listener (backlog 1) in a child
 * process that is stopped (SIGSTOP), so it accepts nothing, and whose accept queue is filled.
 * The kernel then drops further SYNs, and a new connection stays "connecting" — what a dead or
 * filtered host does, without ever leaving loopback. Everything is killed when the test ends.
 */
export async function stalledPort(t: ExecutionContext): Promise<number> {
  const script =
    "const s = require('net').createServer(() => {});" +
    "s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => process.stdout.write(s.address().port + '\\n'));";
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'ignore'] });
  const fillers: Socket[] = [];
  t.teardown(() => {
    for (const socket of fillers) socket.destroy();
    child.kill('SIGKILL');
  });
  const port = await bounded(
    new Promise<number>((resolve) => child.stdout.once('data', (text: Buffer) => resolve(Number(String(text))))),
    DEFAULT_WAIT_MS,
    'the stalled listener to report its port',
  );
  child.kill('SIGSTOP');
  let connected = 0;
  let full!: () => void;
  const queueFull = new Promise<void>((resolve) => (full = resolve));
  for (let i = 0; i < FILLERS; i++) {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.on('error', () => {});
    socket.once('connect', () => {
      if (++connected === QUEUED) full();
    });
    fillers.push(socket);
  }
  await bounded(queueFull, DEFAULT_WAIT_MS, 'the stalled listener to queue its connections');
  return port;
}
