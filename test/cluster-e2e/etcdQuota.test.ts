import test, { type ExecutionContext } from 'ava';
import { Etcd3 } from 'etcd3';
import { EtcdCluster, LockCluster, memberStatus, needsEtcd, untilAnswered, type EtcdMember } from '../helpers/etcdCluster.js';
import { get, sample } from '../helpers/metrics.js';
import { pollUntil } from '../helpers/poll.js';
import type { RawClient } from '../helpers/rawClient.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask, frames, readReply, req } from '../helpers/wire.js';
import { Command } from '../../src/protocol/constants.js';

// etcd's space quota against a client that fills it: the cluster refuses new entries (position 0)
// before etcd's NOSPACE, releases still commit, and the alarm never rises; an alarm someone else
// raised is reported (/readyz, a metric, a log line) and the cluster serves again, without a
// restart, once it is disarmed.

const etcdTest = needsEtcd(test);
/** etcd's --quota-backend-bytes here, and the nodes' --etcd-quota-bytes. */
const QUOTA = 64 * 1024 * 1024;
/** Requests in flight per connection. */
const WINDOW = 64;
/** Longest a node may take to notice something it checks once a second (the format record, etcd's alarms). */
const NOTICE_MS = 60_000;

interface StatusWithSpace {
  readonly dbSize?: string;
  readonly dbSizeInUse?: string;
  readonly errors?: readonly string[];
}

async function space(member: EtcdMember): Promise<{ db: number; inUse: number; noSpace: boolean }> {
  const status = (await memberStatus(member.clientUrl)) as StatusWithSpace | undefined;
  if (status === undefined) throw new Error(`etcd member ${member.name} did not answer its status`);
  return { db: Number(status.dbSize), inUse: Number(status.dbSizeInUse), noSpace: (status.errors ?? []).some((e) => e.includes('NOSPACE')) };
}

async function metricsPort(node: ServerProcess): Promise<number> {
  return Number((await node.event('metrics-started')).fields.port);
}

async function scrape(port: number, series: string): Promise<number | undefined> {
  return sample((await get(port, '/metrics')).body, series);
}

const nodeArgs = ['--etcd-quota-bytes', String(QUOTA), '--metrics-port', '0', '--metrics-listen', '127.0.0.1'];

/** Waits until the node's batches carry the bound (every live node declared it reads it, and the record names it). */
async function boundWritten(port: number): Promise<number> {
  return pollUntil(
    'the entry bound to be written',
    async () => {
      const bound = await scrape(port, 'lockserver_cluster_etcd_entry_bytes_bound');
      return bound !== undefined && bound > 0 ? bound : undefined;
    },
    NOTICE_MS,
  );
}

/** A distinct 255-byte name. */
const longName = (prefix: string, n: number): string => `${prefix}${n}:`.padEnd(255, '#');

/** Connections a fill may lose (a node refuses input read before a stall of its own over 1 s, as a loaded machine has). */
const MAX_RECONNECTS = 20;

/** A new connection, tried again while the node greets 0x00 (the first turn after a stall of its event loop). */
async function reconnect(node: ServerProcess): Promise<RawClient> {
  return pollUntil('a connection the node accepts', async () => {
    try {
      return await node.accepted();
    } catch (error) {
      if (/greeting/.test((error as Error).message)) return undefined;
      throw error;
    }
  });
}

/**
 * Pipelines requests of distinct entries (255-byte key, index and owner, TTL 0) to `node`, WINDOW
 * at a time, until `more` says stop; returns the names sent (granted or not: a window whose
 * connection closed has unknown outcomes, and the fill goes on on a new connection), how many were
 * granted and how many refused.
 */
async function fill(node: ServerProcess, prefix: string, more: (refused: number) => boolean): Promise<{ sent: string[]; refused: number; granted: number }> {
  const sent: string[] = [];
  let refused = 0;
  let granted = 0;
  let client = await node.accepted();
  for (let n = 0, reconnects = 0; more(refused);) {
    const names: string[] = [];
    for (let i = 0; i < WINDOW; i++) names.push(longName(prefix, n++));
    sent.push(...names);
    try {
      client.send(frames(...names.map((name) => req.request(name, name, name))));
      for (let i = 0; i < names.length; i++) {
        const position = await readReply(client, Command.Request);
        if (position === 0) refused++;
        else granted++;
      }
    } catch (error) {
      if (!/closed/.test((error as Error).message) || ++reconnects > MAX_RECONNECTS) throw error;
      client.destroy();
      client = await reconnect(node);
    }
  }
  client.destroy();
  return { sent, refused, granted };
}

async function noAlarm(t: ExecutionContext, etcd: EtcdCluster): Promise<void> {
  for (const member of etcd.members) {
    const s = await space(member);
    t.false(s.noSpace, `${member.name} has no NOSPACE alarm`);
    t.true(s.db < QUOTA, `${member.name}'s backend (${s.db} bytes) below the quota`);
  }
}

etcdTest.serial('a client filling etcd is refused at position 0 before NOSPACE; releases commit; the alarm never rises', async (t) => {
  t.timeout(400_000);
  const etcd = await EtcdCluster.start(t, { extraArgs: ['--quota-backend-bytes', String(QUOTA)] });
  const cluster = new LockCluster(t, etcd);
  const [n1, n2] = await cluster.startNodes(2, nodeArgs);
  const port = await metricsPort(n1!);
  const port2 = await metricsPort(n2!);
  const bound = await boundWritten(port);
  await boundWritten(port2);
  t.is(bound, Math.floor(QUOTA / 20 / 1024) * 1024);

  // Three pipelining connections until each is refused, then on with refused requests (each one
  // still a log command etcd stores) until they carried the quota's worth of log bytes again.
  const refusedToSend = Math.ceil(QUOTA / 780 / 3);
  const results = await Promise.all([n1!, n2!, n1!].map((node, i) => fill(node, `c${i}/`, (refused) => refused < refusedToSend)));
  const sent = results.flatMap((r) => r.sent);
  const perEntry = 96 + 3 * 255;
  // Every entry costs the same: the table holds entry bytes / perEntry of them (a lost window's included).
  const entryBytes = await pollUntil('both nodes to have applied every command of the fill', async () => {
    const [a, b] = [await scrape(port, 'lockserver_cluster_etcd_entry_bytes'), await scrape(port2, 'lockserver_cluster_etcd_entry_bytes')];
    return a !== undefined && a === b ? a : undefined;
  });
  t.is(entryBytes % perEntry, 0);
  const entries = entryBytes / perEntry;
  const defragments =
    ((await scrape(port, 'lockserver_cluster_etcd_defragments_total')) ?? 0) + ((await scrape(port2, 'lockserver_cluster_etcd_defragments_total')) ?? 0);
  t.log(
    `${entries} entries (${entryBytes} entry bytes, bound ${bound}); ${results.map((r) => r.granted).join('+')} granted, ` +
      `${results.map((r) => r.refused).join('+')} refused; ${defragments} defragmentations`,
  );
  t.true(entries >= results.reduce((sum, r) => sum + r.granted, 0), 'every entry granted is in the table');
  t.true(entryBytes <= bound, 'no entry past the bound');
  t.true(entryBytes + perEntry > bound, 'refused at the bound, not before');
  await noAlarm(t, etcd);
  const filled = await space(etcd.members[0]!);
  t.log(`etcd after the fill: dbSize ${filled.db}, in use ${filled.inUse}`);

  // A release commits, and frees its room: a new entry fits again, and one more does not.
  const client = await n1!.accepted();
  const owned = await pollUntil('an entry of the fill', async () => {
    for (const name of sent) if ((await ask.location(client, name, name, name)) === 1) return name;
    return undefined;
  });
  t.is(await ask.release(client, owned, owned, owned), 1);
  const other = await n2!.accepted();
  const after = [longName('after/', 0), longName('after/', 1)];
  t.is(await ask.request(other, after[0]!, after[0]!, after[0]!), 1);
  t.is(await ask.request(other, after[1]!, after[1]!, after[1]!), 0);
  t.is(await ask.release(other, after[0]!, after[0]!, after[0]!), 1);
  // Release-all of every owner the fill named: the table empties, and so do the entry bytes.
  for (let i = 0; i < sent.length; i += WINDOW) {
    const owners = sent.slice(i, i + WINDOW);
    client.send(frames(...owners.map((name) => req.releaseAll(name))));
    for (let j = 0; j < owners.length; j++) await readReply(client, Command.ReleaseAll);
  }
  t.is(await ask.location(client, owned, owned, owned), 0);
  t.is(await scrape(port, 'lockserver_cluster_etcd_entry_bytes'), 0);
  t.is(await scrape(port, 'lockserver_cluster_etcd_nospace'), 0);
  await noAlarm(t, etcd);
});

etcdTest.serial(
  'a NOSPACE alarm raised by another writer is reported on /readyz, in a metric and a log line; once disarmed the cluster serves again',
  async (t) => {
    t.timeout(400_000);
    const etcd = await EtcdCluster.start(t, { extraArgs: ['--quota-backend-bytes', String(QUOTA)] });
    const cluster = new LockCluster(t, etcd);
    const [n1] = await cluster.startNodes(2, nodeArgs);
    const port = await metricsPort(n1!);
    const client = await n1!.accepted();
    t.is(await ask.request(client, 'k', 'i', 'alice'), 1);

    // Another tenant of the etcd cluster fills it until etcd raises NOSPACE.
    const raw = new Etcd3({ hosts: etcd.endpointList });
    t.teardown(() => raw.close());
    const value = Buffer.alloc(1024 * 1024, 7);
    let filled = 0;
    await pollUntil(
      'etcd to refuse the other writer for space',
      async () => {
        try {
          await raw.put(`/other-tenant/${filled++}`).value(value);
          return undefined;
        } catch (error) {
          return /space exceeded/i.test((error as Error).message) ? true : undefined;
        }
      },
      NOTICE_MS,
    );
    t.log(`the other writer put ${filled - 1} MiB before NOSPACE`);

    await n1!.event('etcd-nospace', () => true, NOTICE_MS);
    const notReady = await pollUntil(
      '/readyz to report NOSPACE',
      async () => {
        const r = await get(port, '/readyz');
        return r.status === 503 && /NOSPACE/.test(r.body) ? r : undefined;
      },
      NOTICE_MS,
    );
    t.regex(notReady.body, /etcd out of space/);
    t.is(await scrape(port, 'lockserver_cluster_etcd_nospace'), 1);

    // The operator frees the other tenant's space: deletes its keys, compacts, defragments the
    // members one at a time (etcd's dbSize falls by nothing else), then disarms the alarm.
    await raw.delete().prefix('/other-tenant/');
    const revision = (await raw.get('anything').exec()).header.revision;
    await raw.kv.compact({ revision, physical: true });
    for (const member of etcd.members) {
      const one = new Etcd3({ hosts: [member.clientUrl] });
      try {
        await one.maintenance.defragment();
      } finally {
        one.close();
      }
    }
    for (const member of etcd.members) t.true((await space(member)).db < QUOTA / 2, `${member.name} defragmented`);
    const alarms = await raw.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' });
    for (const alarm of alarms.alarms) await raw.maintenance.alarm({ action: 'Deactivate', memberID: alarm.memberID, alarm: alarm.alarm });

    await n1!.event('etcd-nospace-cleared', () => true, NOTICE_MS);
    await pollUntil('/readyz to report ready', async () => ((await get(port, '/readyz')).status === 200 ? true : undefined), NOTICE_MS);
    t.is(await scrape(port, 'lockserver_cluster_etcd_nospace'), 0);
    // Served again without a restart: a release and a new request commit.
    t.is(await untilAnswered(n1!, (c) => ask.release(c, 'k', 'i', 'alice')), 1);
    t.is(await untilAnswered(n1!, (c) => ask.request(c, 'k2', 'i', 'bob')), 1);
    await noAlarm(t, etcd);
  },
);
