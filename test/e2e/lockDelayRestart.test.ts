import test from 'ava';
import { readFile } from 'node:fs/promises';
import { parseLockFileVersioned } from '../../src/files/lockFile.js';
import { Command } from '../../src/protocol/constants.js';
import type { QueueView } from '../../src/protocol/messages.js';
import { POLL_LIMIT_MS, pollUntil } from '../helpers/poll.js';
import type { RawClient } from '../helpers/rawClient.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, call } from '../helpers/wire.js';

// A real server process with --lock-delay: an owner's TTL runs out and its lock is held back;
// SIGTERM saves, a new server on the same lock file restores. The waiter must not own before the
// rest of the delay, which the lock file kept (time does not run while the server is down).

const DELAY_SECONDS = 20;

function queue(client: RawClient, key: string): Promise<QueueView | undefined> {
  return call(client, { command: Command.ListDetailed, key }).then((queues) => queues[0]);
}

test('--lock-delay across SIGTERM and a restart: the lock stays held back for the rest of its delay, then the waiter owns', async (t) => {
  const args = ['--lock-delay', String(DELAY_SECONDS)];
  const first = await startServer(t, { args });
  const c = await first.accepted();
  t.is(await ask.request(c, 'k', '1', 'alice', { ttl: 1 }), 1);
  t.is(await ask.request(c, 'k', '1', 'bob', { ttl: 600, ttw: 600 }), 2);
  const held = await pollUntil('alice to expire and her lock to be held back', async () => {
    const q = await queue(c, 'k');
    return q !== undefined && q.heldForMs > 0 && q.entries[0]?.owner === 'bob' ? q : undefined;
  });
  t.false(held.entries[0]!.isOwner);

  first.signal('SIGTERM');
  t.deepEqual(await first.waitForExit(), { code: 0, signal: null });
  const saved = parseLockFileVersioned(await readFile(first.lockFile, 'latin1'), first.lockFile);
  t.is(saved.holds.length, 1, 'the lock file records the held-back lock');
  const left = saved.holds[0]!.remainingMs;
  t.true(left > 0 && left <= held.heldForMs, `saved with ${left} ms left`);

  const second = await startServer(t, { dir: first.dir, args });
  const d = await second.accepted();
  const restored = (await queue(d, 'k'))!;
  t.deepEqual(
    restored.entries.map((e) => [e.owner, e.isOwner]),
    [['bob', false]],
    'bob still waits: the restart did not grant him the lock',
  );
  t.true(restored.heldForMs > 0 && restored.heldForMs <= left, `held back ${restored.heldForMs} ms more, of ${left} saved`);
  t.is(await ask.findOwner(d, 'k', '1'), '');
  // Once the rest of the delay is over, bob owns.
  await pollUntil('bob to be granted', async () => ((await ask.findOwner(d, 'k', '1')) === 'bob' ? true : undefined), DELAY_SECONDS * 1000 + POLL_LIMIT_MS);
  t.is((await queue(d, 'k'))!.heldForMs, 0);
});
