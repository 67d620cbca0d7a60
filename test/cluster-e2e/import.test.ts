import test from 'ava';
import { readFile } from 'node:fs/promises';
import { clusterImporting, needsEtcd } from '../helpers/etcdCluster.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// From one box to a cluster without losing a lock: --import-lock-file seeds an empty cluster from
// a single node's lock file, and refuses (writing nothing) when the cluster already holds entries.

const etcdTest = needsEtcd(test);

etcdTest.serial(
  'locks taken on a single node, saved by SIGTERM, are all in a fresh cluster after --import-lock-file; a second import is refused',
  async (t) => {
    t.timeout(120_000);
    // A single node with owners, queued waiters (priority order), a never-expiring entry and bytes.
    const single = await startServer(t);
    const client = await single.accepted();
    t.is(await ask.request(client, 'jobs', 'a', 'alice', { ttl: 600, ttw: 600, priority: 1 }), 1);
    t.is(await ask.request(client, 'jobs', 'a', 'bob', { ttl: 600, ttw: 600, priority: 1 }), 2);
    t.is(await ask.request(client, 'jobs', 'a', 'carol', { ttl: 600, ttw: 600, priority: 9 }), 2);
    t.is(await ask.request(client, 'jobs', 'b', 'dave', { ttl: 0, ttw: 0, priority: 0 }), 1);
    t.is(await ask.request(client, 'r\x00w', '\xff', 'e #1', { ttl: 600, ttw: 0, priority: 0 }), 1);
    const before = await ask.list(client, 'jobs');
    single.signal('SIGTERM');
    t.like(await single.waitForExit(), { code: 0 });

    const original = await readFile(single.lockFile);
    const { cluster, saved, importer, other, entries } = await clusterImporting(t, single.lockFile);
    t.is(entries, '5');

    // Every entry is there, from every node, in the same queue order, with its priority and TTL/TTW.
    for (const node of [importer, other]) {
      const c = await node.accepted();
      t.deepEqual(await ask.list(c, 'jobs'), before);
      t.is(await ask.findOwner(c, 'r\x00w', '\xff'), 'e #1');
      t.is(await ask.location(c, 'jobs', 'a', 'bob'), 3);
      // The cluster goes on from there: alice's release promotes carol (priority 9 before bob).
      if (node === other) {
        t.is(await ask.release(c, 'jobs', 'a', 'alice'), 1);
        t.is(await ask.findOwner(c, 'jobs', 'a'), 'carol');
      }
    }

    // Importing again into a cluster that holds entries: refused at start (exit 1), nothing written.
    const again = await cluster.startNode({ name: 'n3', args: ['--import-lock-file', saved], waitReady: false });
    const exit = await again.waitForExit(60_000);
    t.is(exit.code, 1);
    t.regex(again.stderr, /already holds \d+ entries; nothing was imported/);
    const c = await other.accepted();
    t.is((await ask.list(c, 'jobs')).length, before.length - 1);
    t.deepEqual(await readFile(saved), original, 'the file to import is left as it was');
  },
);
