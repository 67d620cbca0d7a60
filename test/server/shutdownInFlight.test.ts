import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { LocalLockService } from '../../src/locks/LocalLockService.js';
import { idleTimers } from '../doubles/idleTimers.js';
import type { LockService } from '../../src/locks/LockService.js';
import { bounded } from '../helpers/bounded.js';
import { listenInProcess } from '../helpers/lockClient.js';
import { RawClient } from '../helpers/rawClient.js';
import { frames, hex, req } from '../helpers/wire.js';

// README, noble death: "finish requests already received … close every connection". With a
// service that answers later (a replicated core), a request can be in flight when shutdown
// starts; the server must wait for its answer, write it, and only then end the connection.

/** How long the slow service takes to answer: a remote core's round trip. */
const ANSWER_DELAY_MS = 50;
const WAIT_MS = 5_000;

test('shutdown waits for a request in flight, delivers its reply, then ends the connection', async (t) => {
  const local = new LocalLockService(new FakeClock(), idleTimers);
  let called!: () => void;
  const requestCalled = new Promise<void>((resolve) => (called = resolve));
  const service: LockService = Object.assign(Object.create(local) as LockService, {
    request: (r: Parameters<LockService['request']>[0], allowCreate: boolean) => {
      called();
      return new Promise<number>((resolve) => setTimeout(() => resolve(local.request(r, allowCreate)), ANSWER_DELAY_MS));
    },
  });
  const { port, server } = await listenInProcess(t, service, new FakeClock());
  const client = await RawClient.connect(t, { port });
  t.is(hex(await client.read(1)), '01', 'greeted');
  client.send(frames(req.request('k', '1', 'alice', { ttl: 30, ttw: 60 })));
  await bounded(requestCalled, WAIT_MS, 'the request to reach the service');
  // The daemon's order at noble death: stop serving (waiting for what is in flight), then close.
  await server.stopServing();
  server.closeConnections();
  await server.whenAllClosed(WAIT_MS);
  t.is(hex(await client.readUntilClose(WAIT_MS)), '0001', 'the reply (position 1: owner), then a clean end');
  t.deepEqual(await local.snapshot().then((s) => s.map((l) => l.owner)), ['alice']);
});
