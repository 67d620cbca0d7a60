import test from 'ava';
import { Command } from '../../src/protocol/constants.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, frames, readReply, req } from '../helpers/wire.js';
import type { RawClient } from '../helpers/rawClient.js';

const LOCKS = 100_000;
const SETUP_CHUNK = 10_000;

/** Sends the requests in chunks, each chunk's replies read before the next goes. */
async function send(client: RawClient, requests: ReturnType<typeof req.request>[]): Promise<void> {
  for (let from = 0; from < requests.length; from += SETUP_CHUNK) {
    const chunk = requests.slice(from, from + SETUP_CHUNK);
    client.send(frames(...chunk));
    for (const request of chunk) await readReply(client, request.command);
  }
}

test('while a release-all of 100k locks with a waiter each runs, another connection keeps being answered, and none is closed', async (t) => {
  const server = await startServer(t);
  const owner = await server.accepted();
  const waiter = await server.accepted();
  const other = await server.accepted();
  await send(
    owner,
    Array.from({ length: LOCKS }, (_, n) => req.request(`k${n}`, 'i', 'X')),
  );
  await send(
    waiter,
    Array.from({ length: LOCKS }, (_, n) => req.request(`k${n}`, 'i', `W${n}`)),
  );
  t.is(await ask.findOwner(other, 'k0', 'i'), 'X');

  let released = false;
  owner.send(frames(req.releaseAll('X')));
  const reply = readReply(owner, Command.ReleaseAll).then((count) => {
    released = true;
    return count;
  });
  // Each question is sent only after the answer before it came: every one answered before the
  // release-all's reply was asked after the release-all was sent.
  let answeredDuring = 0;
  for (let n = 0; !released; n++) {
    t.is(await ask.request(other, `other${n}`, 'i', 'O'), 1);
    if (!released) answeredDuring++;
  }
  await reply;
  t.log(`answered ${answeredDuring} times during the release-all`);
  t.true(answeredDuring >= 3, `answered ${answeredDuring} times while the release-all ran`);
  t.is(await ask.findOwner(other, `k${LOCKS - 1}`, 'i'), `W${LOCKS - 1}`);
  t.is(await ask.location(other, 'k0', 'i', 'X'), 0);
  t.is(await ask.findOwner(waiter, 'k0', 'i'), 'W0', 'every connection still open');
  t.is(await ask.findOwner(owner, 'k1', 'i'), 'W1');
  t.deepEqual(server.eventsNamed('stale-input-refused'), []);
  t.deepEqual(server.eventsNamed('connection-error'), []);
});
