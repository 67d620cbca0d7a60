import test from 'ava';
import { needsEtcd, startCluster } from '../helpers/etcdCluster.js';
import { pipeline, req } from '../helpers/wire.js';

// Batches at etcd's request limit: a client pipelining thousands of commands with the longest
// names a request can carry fills batches by bytes, not by count, and every one must commit.

const etcdTest = needsEtcd(test);
const COMMANDS = 3_000;
/** A 255-byte name (the wire's longest), unique per command, none of it UTF-8. */
const longName = (i: number): string => `${'\xff'.repeat(251)}${String.fromCharCode(i >> 24, (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff)}`;

etcdTest.serial('thousands of pipelined requests and releases with 255-byte names are all answered: no batch outgrows what etcd accepts', async (t) => {
  t.timeout(120_000);
  const { nodes } = await startCluster(t, { nodes: 1, args: ['--commit-timeout', '5'] });
  const client = await nodes[0]!.accepted();
  const names = Array.from({ length: COMMANDS }, (_, i) => longName(i));
  // One write of about 2.3 MB: the node reads it while its first round is out, so the next rounds
  // are full ones, each closed by its byte limit (a few hundred KiB of commands in one append).
  const requested = await pipeline(client, ...names.map((name) => req.request(name, name, name, { ttl: 60 })));
  t.deepEqual(new Set(requested), new Set([1]), 'every request owns its lock');
  const released = await pipeline(client, ...names.map((name) => req.release(name, name, name)));
  t.deepEqual(new Set(released), new Set([1]), 'every release removes one');
});
