import { randomBytes } from 'node:crypto';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import { Etcd3 } from 'etcd3';
import { EtcdLog } from '../../../src/cluster/EtcdLog.js';
import { AppendRefusedError, type LogPosition } from '../../../src/cluster/ReplicatedLog.js';
import { bounded } from '../../helpers/bounded.js';
import { EtcdCluster, memberStatus, needsEtcd } from '../../helpers/etcdCluster.js';

// Defect 5 of issue 17, reproduced on loopback: an append whose bytes sit on the way to etcd
// (as in a cut link's send queue) until after its caller gave up and its writer lease ended is
// refused when it finally arrives. The relay holds HTTP/2 frames from EtcdLog to etcd and delivers
// them late, minus what would cancel the request on arrival: the RST_STREAM that grpc-js sends
// when the call's deadline passes, and the GOAWAY and FIN of the channel etcd3 then closes. On a
// real link those arrive right behind the request and race with it (the request won in the
// defect's fault runs, committing up to 55 s late); here the request always wins.

const etcdTest = needsEtcd(test);
const CALL_MS = 5_000;
const HTTP2_PREFACE_BYTES = 24;
const FRAME_HEADER_BYTES = 9;
const RST_STREAM = 0x3;
const GOAWAY = 0x7;

/** A loopback TCP relay to `port` that can hold client→server HTTP/2 frames and release them later. */
class HoldingRelay {
  private holding = false;
  private readonly held: Array<() => void> = [];
  readonly server: Server;
  readonly sockets = new Set<Socket>();

  constructor(private readonly port: number) {
    this.server = createServer((client) => this.relay(client));
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  hold(): void {
    this.holding = true;
  }

  release(): void {
    this.holding = false;
    for (const send of this.held.splice(0)) send();
  }

  close(): void {
    for (const socket of this.sockets) socket.destroy();
    this.server.close();
  }

  private relay(client: Socket): void {
    const upstream = connect(this.port, '127.0.0.1');
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on('error', () => {});
    }
    upstream.on('close', () => client.destroy());
    // The client's FIN is not passed on while holding; the upstream stays open until close().
    client.on('close', () => this.holding || upstream.end());
    upstream.pipe(client);
    let pending = Buffer.alloc(0);
    let prefaceLeft = HTTP2_PREFACE_BYTES;
    client.on('data', (data: Buffer) => {
      pending = Buffer.concat([pending, data]);
      if (prefaceLeft > 0) {
        const preface = pending.subarray(0, Math.min(prefaceLeft, pending.length));
        prefaceLeft -= preface.length;
        pending = pending.subarray(preface.length);
        this.forward(upstream, preface, false);
      }
      // Whole frames only: 3-byte length, type, flags, stream id, payload.
      while (pending.length >= FRAME_HEADER_BYTES) {
        const size = FRAME_HEADER_BYTES + pending.readUIntBE(0, 3);
        if (pending.length < size) break;
        const frame = pending.subarray(0, size);
        pending = pending.subarray(size);
        this.forward(upstream, frame, frame[3] === RST_STREAM || frame[3] === GOAWAY);
      }
    });
  }

  private forward(upstream: Socket, bytes: Buffer, cancels: boolean): void {
    if (!this.holding) {
      upstream.write(bytes);
    } else if (!cancels) {
      const copy = Buffer.from(bytes);
      this.held.push(() => upstream.write(copy));
    }
  }
}

/** Every value the log key of `cluster` has had, in order, up to the first one equal to `last` (a bounded wait). */
async function logHistory(t: ExecutionContext, raw: Etcd3, cluster: string, last: string): Promise<string[]> {
  const history: string[] = [];
  const watcher = await raw.watch().key(`/${cluster}/log`).startRevision('1').create();
  t.teardown(() => watcher.cancel());
  const sawLast = new Promise<void>((resolve) =>
    watcher.on('put', (kv) => {
      history.push(kv.value.toString());
      if (kv.value.toString() === last) resolve();
    }),
  );
  await bounded(sawLast, 10_000, `the watch to bring the append "${last}"`);
  return history;
}

async function leasesLeft(raw: Etcd3): Promise<number> {
  return (await raw.leaseClient.leaseLeases()).leases.length;
}

/**
 * Three etcd members and a holding relay in front of a follower; `moveLeader` hands leadership to
 * the other follower (`other`), as an election would.
 */
async function relayedFollower(t: ExecutionContext) {
  const etcd = await EtcdCluster.start(t);
  const leader = await etcd.leader();
  const [follower, other] = etcd.others(leader) as [(typeof etcd.members)[number], (typeof etcd.members)[number]];
  const relay = new HoldingRelay(follower.clientPort);
  const url = await relay.listen();
  t.teardown(() => relay.close());
  const raw = new Etcd3({ hosts: etcd.endpointList });
  t.teardown(() => raw.close());
  const toLeader = new Etcd3({ hosts: [leader.clientUrl] });
  t.teardown(() => toLeader.close());
  const moveLeader = async (): Promise<void> => {
    const target = await memberStatus(other.clientUrl);
    if (target === undefined) throw new Error(`no status from ${other.clientUrl}`);
    await toLeader.maintenance.moveLeader({ targetID: target.header.member_id });
  };
  return { etcd, leader, other, relay, url, raw, moveLeader, cluster: `t${randomBytes(5).toString('hex')}` };
}

etcdTest(
  'an append held on the way until its writer lease ended is refused when it reaches etcd; appends before and after commit',
  async (t: ExecutionContext) => {
    t.timeout(60_000);
    const etcd = await EtcdCluster.start(t, { members: 1 });
    const relay = new HoldingRelay(etcd.members[0]!.clientPort);
    const url = await relay.listen();
    t.teardown(() => relay.close());
    const cluster = `t${randomBytes(5).toString('hex')}`;
    const log = new EtcdLog({ endpoints: [url], cluster });
    t.teardown(() => log.close());
    const raw = new Etcd3({ hosts: etcd.endpointList });
    t.teardown(() => raw.close());

    t.is((await log.append(Buffer.from('ordinary'), CALL_MS)).version, 1);
    relay.hold();
    await t.throwsAsync(log.append(Buffer.from('late'), 300), { message: /did not complete|DEADLINE_EXCEEDED/ });
    const rejectedAt = Date.now();
    // The late append's lease (the only lease there is) ends; etcd revokes it by itself.
    for (const deadline = Date.now() + 20_000; (await leasesLeft(raw)) > 0;) {
      if (Date.now() >= deadline) throw new Error('the writer lease was not revoked within 20 s');
      await delay(100);
    }
    t.log(`writer lease gone ${Date.now() - rejectedAt} ms after the append was given up; lateCommitMs ${log.lateCommitMs}`);
    relay.release();

    // The late txn arrives first on the connection, ahead of the next append's lease grant.
    t.is((await log.append(Buffer.from('next'), CALL_MS)).version, 2);
    t.deepEqual(await logHistory(t, raw, cluster, 'next'), ['ordinary', 'next'], 'the held append never committed');
  },
);

// Why appends are sealed: a new etcd leader gives every lease its full TTL again (lessor.Promote),
// so an append held on the way across a leader change outlives its time fence. Without the seal
// (checked by leaving it out) the held append below commits 4.3 s after it was given up, past
// lateCommitMs (4 s); with it, etcd refuses it when it arrives. The node's janitor, which would
// revoke the lease too (see the next tests), is left out so that the seal alone is tested.
etcdTest.serial(
  'an append held on the way to a follower while etcd changes leader is refused when it arrives, once seal() resolved',
  async (t: ExecutionContext) => {
    t.timeout(60_000);
    const { other, relay, url, raw, moveLeader, cluster } = await relayedFollower(t);
    // The seal goes to another member: the relay holds everything sent through it.
    const log = new EtcdLog({ endpoints: [url, other.clientUrl], cluster });
    t.teardown(() => log.close());
    // The janitor left out: its sweeps, and its revokes before the next append.
    clearInterval(log['janitor']['sweeper']);
    log['janitor'].untilOverdueGone = () => undefined;

    // Appends go through the relay: the pool is moved off the other member.
    const pool = log['pool'];
    if (pool.preferred.url !== url) pool.leave(pool.preferred);
    t.is(pool.preferred.url, url);
    t.is((await log.append(Buffer.from('ordinary'), CALL_MS)).version, 1);
    relay.hold();
    await t.throwsAsync(log.append(Buffer.from('late'), 300));
    const rejectedAt = Date.now();
    await moveLeader();
    await log.seal(CALL_MS);
    t.log(`leader moved and appends sealed ${Date.now() - rejectedAt} ms after the append was given up`);
    // Released past the time fence, while the lease the leader change renewed would still pass.
    await delay(Math.max(0, rejectedAt + log.lateCommitMs + 300 - Date.now()));
    relay.release();
    t.log(`released ${Date.now() - rejectedAt} ms after the append was given up; lateCommitMs ${log.lateCommitMs}`);

    const next = await log.append(Buffer.from('next'), CALL_MS);
    t.deepEqual(await logHistory(t, raw, cluster, 'next'), ['ordinary', 'next'], 'the held append never committed');
    t.is(next.version, 2);
  },
);

/**
 * Node A (`cutOff`) reaches etcd only through the relay, node B (`bystander`) the two other
 * members. A appends once, then an append of A ("late") is held by the relay and given up on.
 */
async function heldFromCutOffNode(
  t: ExecutionContext,
  { leader, other, relay, url, cluster }: Pick<Awaited<ReturnType<typeof relayedFollower>>, 'leader' | 'other' | 'relay' | 'url' | 'cluster'>,
): Promise<{ cutOff: EtcdLog; bystander: EtcdLog; rejectedAt: number }> {
  const cutOff = new EtcdLog({ endpoints: [url], cluster });
  t.teardown(() => cutOff.close());
  const bystander = new EtcdLog({ endpoints: [other.clientUrl, leader.clientUrl], cluster });
  t.teardown(() => bystander.close());
  await bystander.head(CALL_MS);
  t.is((await cutOff.append(Buffer.from('ordinary'), CALL_MS)).version, 1);
  relay.hold();
  await t.throwsAsync(cutOff.append(Buffer.from('late'), 300));
  return { cutOff, bystander, rejectedAt: Date.now() };
}

// The seal needs its own node to reach etcd. When it cannot (cut off, paused, crashed), every
// other node revokes the lease once it is overdue (WriterLeaseJanitor), leader change or not.
// Without that (checked by leaving the janitor out) the held append below commits, as in the
// test above without the seal.
etcdTest.serial(
  'an append held on the way from a node cut off from etcd while etcd changes leader is refused when it arrives: another node revoked its lease',
  async (t: ExecutionContext) => {
    t.timeout(60_000);
    const { leader, other, relay, url, raw, moveLeader, cluster } = await relayedFollower(t);
    const { cutOff, bystander, rejectedAt } = await heldFromCutOffNode(t, { leader, other, relay, url, cluster });
    await moveLeader();
    t.log(`leader moved ${Date.now() - rejectedAt} ms after the append was given up`);
    // Released past the time fence, while the lease the leader change renewed would still pass.
    await delay(Math.max(0, rejectedAt + cutOff.lateCommitMs + 300 - Date.now()));
    relay.release();
    t.log(`released ${Date.now() - rejectedAt} ms after the append was given up; lateCommitMs ${cutOff.lateCommitMs}`);

    const next = await cutOff.append(Buffer.from('next'), CALL_MS);
    t.deepEqual(await logHistory(t, raw, cluster, 'next'), ['ordinary', 'next'], 'the held append never committed');
    t.is(next.version, 2);
    t.true(bystander.overdueLeasesRevoked >= 1, 'the other node revoked the overdue lease');
  },
);

// When etcd has no leader as a lease falls due, nobody can revoke it and etcd cannot let it expire;
// the next leader renews it. A node then appends (and reads the head) only after revoking every
// lease it knows to be overdue, so a held append lands before that node's batch or never. The
// janitor's own sweeps are stopped here, so that only that rule can stop the held append: without
// it (checked by leaving it out) the held append commits after the other node's batch.
etcdTest.serial(
  'after etcd was without a leader as a lease fell due, a node revokes the overdue lease before it appends: a held append cannot land after its batch',
  async (t: ExecutionContext) => {
    t.timeout(90_000);
    const { etcd, leader, other, relay, url, raw, cluster } = await relayedFollower(t);
    const { cutOff, bystander, rejectedAt } = await heldFromCutOffNode(t, { leader, other, relay, url, cluster });
    clearInterval(bystander['janitor']['sweeper']); // nothing is due before the lease's TTL has passed
    // No quorum, hence no leader, until the lease is overdue and the time fence has passed; then
    // the other two members elect a new leader, which renews the lease (the old one stays paused:
    // resumed, its own lessor might revoke the lease, expired in its view, and hide the point).
    for (const member of [leader, other]) etcd.pause(member);
    t.teardown(() => etcd.resume(leader));
    await delay(cutOff.lateCommitMs + 300);
    etcd.resume(other);
    await etcd.leader();
    t.log(`etcd has a leader again ${Date.now() - rejectedAt} ms after the append was given up; lateCommitMs ${cutOff.lateCommitMs}`);

    // Refused attempts (etcd right after its election may time out a grant) sent nothing: try again.
    let appended: LogPosition | undefined;
    for (let attempt = 1; appended === undefined; attempt++) {
      appended = await bystander.append(Buffer.from('other node'), CALL_MS).catch((error: unknown) => {
        if (!(error instanceof AppendRefusedError) || attempt === 5) throw error;
        t.log(`attempt ${attempt}: ${error.message}`);
        return undefined;
      });
    }
    t.is(appended.version, 2);
    relay.release();
    const next = await cutOff.append(Buffer.from('next'), CALL_MS);
    etcd.resume(leader); // the held append arrived ahead of 'next' on its connection: settled
    t.deepEqual(await logHistory(t, raw, cluster, 'next'), ['ordinary', 'other node', 'next'], 'the held append never committed');
    t.is(next.version, 3);
  },
);
