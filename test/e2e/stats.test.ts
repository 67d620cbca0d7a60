import test from 'ava';
import { performance } from 'node:perf_hooks';
import { pollUntil } from '../helpers/poll.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, enqueue, pipeline, req } from '../helpers/wire.js';

test('stats count every command of each kind, the answering stats request included', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.like(await ask.stats(c), {
    lockRequests: 0,
    ownerLookups: 0,
    contenderLookups: 0,
    renewals: 0,
    releases: 0,
    releaseAlls: 0,
    listRequests: 0,
    statsRequests: 1,
    acceptedConnections: 1,
    rejectedNotInHosts: 0,
    rejectedTooBusy: 0,
    owners: 0,
    contenders: 0,
    activeConnections: 1,
  });
  await pipeline(
    c,
    req.request('k', '1', 'a'),
    req.request('k', '1', 'b'),
    req.request('k', '1', 'b'),
    req.findOwner('k', '1'),
    req.findOwner('nope', '1'),
    req.location('k', '1', 'b'),
    req.renew('k', '1', 'nobody'),
    req.release('k', '1', 'nobody'),
    req.releaseAll('nobody'),
    req.list('k'),
    req.list('k'),
    req.list('nope'),
  );
  // Failed look-ups, renewals and releases count as much as successful ones.
  t.like(await ask.stats(c), {
    lockRequests: 3,
    ownerLookups: 2,
    contenderLookups: 1,
    renewals: 1,
    releases: 1,
    releaseAlls: 1,
    listRequests: 3,
    statsRequests: 2,
    owners: 1,
    contenders: 1,
  });
});

test('owners and contenders are gauges that follow requests, releases and promotions', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.deepEqual(await enqueue(c, ['k', '1', 'a'], ['k', '1', 'b'], ['k', '1', 'c'], ['k', '2', 'a'], ['j', '1', 'd']), [1, 2, 3, 1, 1]);
  t.like(await ask.stats(c), { owners: 3, contenders: 2 });
  await ask.release(c, 'k', '1', 'a');
  t.like(await ask.stats(c), { owners: 3, contenders: 1 });
  await ask.releaseAll(c, 'a');
  t.like(await ask.stats(c), { owners: 2, contenders: 1 });
  await ask.release(c, 'k', '1', 'c');
  t.like(await ask.stats(c), { owners: 2, contenders: 0 });
});

test('active connections include the asker and fall when a client leaves; accepted keeps counting', async (t) => {
  const server = await startServer(t);
  const first = await server.accepted();
  const second = await server.accepted();
  const third = await server.accepted();
  t.like(await ask.stats(first), { activeConnections: 3, acceptedConnections: 3 });
  second.destroy();
  third.end();
  const settled = await pollUntil('the server to notice two clients leaving', async () => {
    const stats = await ask.stats(first);
    return stats.activeConnections === 1 ? stats : undefined;
  });
  t.is(settled.acceptedConnections, 3);
  const fourth = await server.accepted();
  t.like(await ask.stats(fourth), { activeConnections: 2, acceptedConnections: 4 });
});

test('the uptime is whole seconds since start, and advances', async (t) => {
  const spawned = performance.now();
  const server = await startServer(t);
  const c = await server.accepted();
  const first = (await ask.stats(c)).uptimeSeconds;
  const later = await pollUntil('the uptime to advance', async () => {
    const uptime = (await ask.stats(c)).uptimeSeconds;
    return uptime !== first ? uptime : undefined;
  });
  t.true(later > first);
  // Seconds (not milliseconds, not the machine's uptime): never more than the time since spawning.
  t.true(later <= Math.ceil((performance.now() - spawned) / 1000), `uptime ${later}`);
});
