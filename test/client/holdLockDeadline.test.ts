import test from 'ava';
import { performance } from 'node:perf_hooks';
import { LockLostError } from '../../src/client/errors.js';
import { holdLock } from '../../src/client/holdLock.js';
import { Command } from '../../src/protocol/constants.js';
import { bounded } from '../helpers/bounded.js';
import { connectClient, fakeServer } from '../helpers/lockClient.js';
import { startServer } from '../helpers/serverProcess.js';

// A held lock is the caller's until the last confirmed renewal's send + TTL, and not a moment longer.

const WAIT_MS = 10_000;

/** Greeting, then acquire-and-wait (0x0B) granted at once (position 1, token 7); nothing else is ever answered. */
const GRANT_THEN_SILENCE = Buffer.from([0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 7]);

test('renewals merely late (sent, never answered, never failed): the signal aborts at the deadline, the last confirmed send + TTL', async (t) => {
  const port = await fakeServer(t, (socket) => {
    socket.write(Buffer.from([0x01]));
    let granted = false;
    socket.on('data', (data: Buffer) => {
      if (!granted && data[0] === Command.AcquireWait) {
        granted = true;
        socket.write(GRANT_THEN_SILENCE);
      }
    });
  });
  // No reply limit: a renewal never fails, it only stays unanswered.
  const client = await connectClient(t, port, { requestTimeoutMs: 0 });
  const askedAfter = performance.now();
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 1 });
  t.is(lock.token, 7);
  t.true(lock.ownedUntil >= askedAfter + 1000 && lock.ownedUntil <= performance.now() + 1000, 'counted from the wait’s send');
  const abortedAt = await bounded(
    new Promise<number>((resolve) => lock.signal.addEventListener('abort', () => resolve(performance.now()), { once: true })),
    WAIT_MS,
    'the lock to be lost at its deadline',
  );
  t.true(abortedAt >= lock.ownedUntil, 'not before the deadline');
  t.true(lock.lostError instanceof LockLostError);
  t.regex(lock.lostError!.message, /no node confirmed a renewal within the lock's TTL \(1 s\)/);
  t.true(client.inFlight > 0, 'renewals were outstanding, none had failed');
});

test('onRenewed tells each confirmed renewal’s deadline, the one ownedUntil gives; onOwned the first', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  let first: number | undefined;
  const told: number[] = [];
  let twoTold!: () => void;
  const twoRenewals = new Promise<void>((resolve) => (twoTold = resolve));
  const lock = await holdLock(client, 'k', 'i', 'me', {
    ttl: 3,
    renewIntervalMs: 50,
    onOwned: (_token, ownedUntil) => (first = ownedUntil),
    onRenewed: (ownedUntil) => {
      if (told.push(ownedUntil) === 2) twoTold();
    },
  });
  t.is(first, lock.ownedUntil);
  await bounded(twoRenewals, WAIT_MS, 'two renewals to be confirmed');
  t.true(told[0]! > first! && told[1]! > told[0]!, String(told));
  t.is(told.at(-1), lock.ownedUntil);
  await lock.release();
});
