import test from 'ava';
import { readFile, writeFile } from 'node:fs/promises';
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
    [['k', '1', 'alice', true], ['k', '1', 'bob', false], ['j', 'x', 'carol', true]],
  );

  // Still running, still the same state; a second SIGUSR1 writes fresh figures.
  t.true(server.running);
  t.is(await ask.findOwner(client, 'k', '1'), 'alice');
  const again = server.nextEvent('stats-written');
  server.signal('SIGUSR1');
  await again;
  t.regex(await readFile(server.statFile, 'utf8'), /^owner lookups:\s+2$/m);
});
