import test from 'ava';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { holdLock } from '../../src/client/holdLock.js';
import { bounded } from '../helpers/bounded.js';
import { connectClient, serverBeforeWaitingInFrontOf, startCountingServer } from '../helpers/lockClient.js';

// README: where the server has no acquire-and-wait (0x0B), holdLock (and lockctl hold) polls
// "from 50 ms to at most 1 s and never more than a third of the TTW/TTL", which keeps the waiting
// entry alive. The waiter talks to a stand-in for a lockserver from before waiting, which closes
// the connection on 0x0B as on any byte it does not know; while another client holds the lock,
// the server behind it counts every request with fence (0x0A) the waiter sends; the documented
// longest pause gives the least number of polls a window of waiting must see.

/** How long the other client keeps the lock while the waiter polls. */
const WINDOW_MS = 10_000;
const WAIT_MS = 10_000;

const polling = test.macro(async (t, phase: { ttl: number; ttw: number }) => {
  const { server, received } = await startCountingServer(t);
  const holder = await connectClient(t, server.port);
  const waiter = await connectClient(t, await serverBeforeWaitingInFrontOf(t, server.port));
  t.is(await holder.request('k', 'i', 'holder', { ttl: 0, ttw: 0 }), 1);
  const requestsBefore = await received('request-fenced');
  const longestPauseMs = (Math.min(phase.ttl || Infinity, phase.ttw || Infinity) * 1000) / 3;
  const started = performance.now();
  // pollMaxMs far above the bound, and the slowest jitter: only the TTW/TTL bound keeps polls frequent.
  const acquiring = holdLock(waiter, 'k', 'i', 'waiter', { ...phase, pollMaxMs: 60_000, random: () => 0.999 });
  acquiring.catch(() => {});
  await delay(WINDOW_MS);
  const polls = (await received('request-fenced')) - requestsBefore;
  const waited = performance.now() - started;
  // A poll at the start, then at least one per longest pause.
  const least = Math.floor(waited / longestPauseMs);
  t.true(polls >= least, `${polls} polls in ${Math.round(waited)} ms; a pause of at most ${longestPauseMs} ms means ≥ ${least}`);
  t.is(await holder.location('k', 'i', 'waiter'), 2, 'the waiting entry is alive');
  t.is(await received('acquire-wait'), 0, 'no 0x0B reached the server');
  t.is(await holder.release('k', 'i', 'holder'), 1);
  const lock = await bounded(acquiring, WAIT_MS, 'the lock after the holder let go');
  await lock.release();
});

test('while waiting, holdLock polls at least every third of the TTW', polling, { ttl: 30, ttw: 3 });
test('while waiting, holdLock polls at least every third of the TTL', polling, { ttl: 3, ttw: 0 });
