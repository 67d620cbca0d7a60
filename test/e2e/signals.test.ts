import test from 'ava';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import type { StatsReply } from '../../src/protocol/messages.js';
import { parseLockFile } from '../../src/files/lockFile.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, hex, pipeline, req } from '../helpers/wire.js';

// SIGHUP (reload hosts) and SIGUSR1 (stat file + lock file); the server keeps running after both.

test('SIGHUP reloads the hosts file: a newly listed 127.0.0.3 gets in', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n' });
  const before = await server.connect({ localAddress: '127.0.0.3' });
  t.is(hex(await before.readUntilClose()), '00');

  await writeFile(server.hostsFile, '127.0.0.1\n# the new box\n127.0.0.3\n');
  const reloaded = server.nextEvent('hosts-reloaded');
  server.signal('SIGHUP');
  t.is((await reloaded).fields.entries, '2');

  const after = await server.accepted({ localAddress: '127.0.0.3' });
  t.is(await ask.request(after, 'k', '1', 'three'), 1);
  t.like(await ask.stats(after), { acceptedConnections: 1, rejectedNotInHosts: 1 });
});

test('SIGHUP with a broken hosts file keeps the old list and logs the bad line', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n127.0.0.3\n' });
  const held = await server.accepted({ localAddress: '127.0.0.3' });

  await writeFile(server.hostsFile, '127.0.0.1\n\n# nothing to see\nnot-an-address\n');
  const failed = server.nextEvent('hosts-reload-failed');
  server.signal('SIGHUP');
  const error = (await failed).fields.error ?? '';
  t.true(error.includes(`${server.hostsFile}:4`), error);
  t.true(error.includes('not-an-address'), error);

  // The old list (which admits 127.0.0.3) is still in force, and connections are untouched.
  const newcomer = await server.accepted({ localAddress: '127.0.0.3' });
  t.like(await ask.stats(newcomer), { acceptedConnections: 2, activeConnections: 2 });
  t.like(await ask.stats(held), { statsRequests: 2 });
  t.true(server.running);
});

test('SIGHUP that narrows the list refuses newcomers but keeps connections already in', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.0/8\n' });
  const held = await server.accepted({ localAddress: '127.0.0.2' });
  await writeFile(server.hostsFile, '127.0.0.1\n');
  const reloaded = server.nextEvent('hosts-reloaded');
  server.signal('SIGHUP');
  await reloaded;
  const newcomer = await server.connect({ localAddress: '127.0.0.2' });
  t.is(hex(await newcomer.readUntilClose()), '00');
  t.is(await ask.request(held, 'k', '1', 'two'), 1);
});

test('SIGUSR1 writes the stats, human-readable, to the stat file, saves the locks, and keeps running', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  await pipeline(
    client,
    req.request('k', '1', 'alice', { ttl: 0 }),
    req.request('k', '1', 'bob', { ttw: 0, priority: 2 }),
    req.request('j', 'x', 'carol'),
    req.findOwner('k', '1'),
    req.list('k'),
    req.stats(),
  );
  const statsWritten = server.nextEvent('stats-written');
  const locksSaved = server.nextEvent('locks-saved');
  server.signal('SIGUSR1');
  t.is((await statsWritten).fields.file, server.statFile);
  t.is((await locksSaved).fields.count, '3');

  const text = await readFile(server.statFile, 'utf8');
  t.regex(text, /^lock requests:\s+3$/m);
  t.regex(text, /^owner lookups:\s+1$/m);
  t.regex(text, /^lock dump requests:\s+1$/m);
  t.regex(text, /^statistics requests:\s+1$/m);
  t.regex(text, /^accepted connections:\s+1$/m);
  t.regex(text, /^current lock owners:\s+2$/m);
  t.regex(text, /^current lock contenders \(non owners\):\s+1$/m);
  t.regex(text, /^active connections:\s+1$/m);

  const saved = parseLockFile(await readFile(server.lockFile, 'latin1'), server.lockFile);
  t.deepEqual(
    saved.map((l) => [l.key, l.index, l.owner, l.isOwner]),
    [
      ['k', '1', 'alice', true],
      ['k', '1', 'bob', false],
      ['j', 'x', 'carol', true],
    ],
  );

  // Still running, still the same state; a second SIGUSR1 writes fresh figures.
  t.true(server.running);
  t.is(await ask.findOwner(client, 'k', '1'), 'alice');
  const again = server.nextEvent('stats-written');
  server.signal('SIGUSR1');
  await again;
  t.regex(await readFile(server.statFile, 'utf8'), /^owner lookups:\s+2$/m);
});

/** The stat file's labels, in the protocol document's words and order, and what each one is. */
const STAT_LABELS: ReadonlyArray<[string, keyof StatsReply]> = [
  ['uptime (seconds)', 'uptimeSeconds'],
  ['lock requests', 'lockRequests'],
  ['owner lookups', 'ownerLookups'],
  ['contender lookups', 'contenderLookups'],
  ['lock renewal requests', 'renewals'],
  ['specific lock releases', 'releases'],
  ['general lock releases', 'releaseAlls'],
  ['lock dump requests', 'listRequests'],
  ['statistics requests', 'statsRequests'],
  ['accepted connections', 'acceptedConnections'],
  ['rejected connections (not in hosts file)', 'rejectedNotInHosts'],
  ['rejected connections (too busy)', 'rejectedTooBusy'],
  ['current lock owners', 'owners'],
  ['current lock contenders (non owners)', 'contenders'],
  ['active connections', 'activeConnections'],
];

const times = <T>(n: number, make: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => make(i));

test('the stat file holds all 15 figures of the stats command, and is replaced whole (a new file each time)', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n', args: ['--max-connections', '3'] });
  const client = await server.accepted();
  // A distinct count for every counter, so a figure under the wrong label cannot pass.
  await pipeline(
    client,
    ...times(6, (i) => req.request('k', '1', `waiter${i}`)),
    ...times(14, (i) => req.request(`key${i}`, '1', 'o')),
    ...times(16, () => req.findOwner('k', '1')),
    ...times(17, () => req.location('k', '1', 'x')),
    ...times(18, () => req.renew('k', '1', 'x')),
    ...times(19, () => req.release('k', '1', 'x')),
    ...times(21, () => req.releaseAll('x')),
    ...times(22, () => req.list('k')),
  );
  for (let i = 0; i < 2; i++) t.is(hex(await (await server.connect({ localAddress: '127.0.0.2' })).readUntilClose()), '00');
  await server.accepted();
  await server.accepted();
  t.is(hex(await (await server.connect()).readUntilClose()), '00', 'too busy');
  const written = server.nextEvent('stats-written');
  const firstSave = server.nextEvent('locks-saved');
  server.signal('SIGUSR1');
  await written;
  // The lock save follows the stat file; wait for it, so the next locks-saved is the next signal's.
  await firstSave;
  const before = await stat(server.statFile);
  const reply = await ask.stats(client);
  const figures = new Map<string, number>();
  for (const line of (await readFile(server.statFile, 'utf8')).split('\n').slice(1, -1)) {
    const match = /^(.+):\s+(\d+)$/.exec(line);
    if (match === null) return t.fail(`not a figure: ${line}`);
    figures.set(match[1]!, Number(match[2]));
  }
  t.deepEqual(
    [...figures.keys()],
    STAT_LABELS.map(([label]) => label),
  );
  for (const [label, field] of STAT_LABELS) {
    const inFile = figures.get(label)!;
    if (field === 'uptimeSeconds') t.true(inFile <= reply.uptimeSeconds);
    // The stats request that fetched `reply` came after the file was written.
    else if (field === 'statsRequests') t.is(inFile, reply.statsRequests - 1, label);
    else t.is(inFile, reply[field], label);
  }
  t.like(reply, { lockRequests: 20, owners: 15, contenders: 5, ownerLookups: 16, releaseAlls: 21, rejectedNotInHosts: 2 });

  // Replaced by rename, never rewritten in place: a reader holding the old file keeps it whole.
  const again = server.nextEvent('stats-written');
  const saved = server.nextEvent('locks-saved');
  server.signal('SIGUSR1');
  await again;
  await saved;
  t.not((await stat(server.statFile)).ino, before.ino);
  t.deepEqual(
    (await readdir(server.dir)).filter((name) => name.endsWith('.tmp')),
    [],
  );
});
