import { randomBytes } from 'node:crypto';
import test from 'ava';
import { Etcd3 } from 'etcd3';
import { EtcdLog } from '../../../src/cluster/EtcdLog.js';
import { EtcdCluster, needsEtcd } from '../../helpers/etcdCluster.js';
import { pollUntil } from '../../helpers/poll.js';

// The heartbeat and the name takeover on a real etcd: a beat rewrites the name key under its own
// lease (its mod revision moves), members() reads every name's beat and candidacy at once, and a
// claim naming the beat it saw stand still moves the name, with its candidacy and formats, to the
// claimant's lease, revokes the old one, and makes the old holder's next beat lose its session.

const etcdTest = needsEtcd(test);
const CALL_MS = 5_000;

etcdTest(
  'a beat moves the name key’s revision; a takeover needs the beat still where it was seen, moves every key of the name and ends the old session',
  async (t) => {
    t.timeout(60_000);
    const etcd = await EtcdCluster.start(t, { members: 1 });
    const cluster = `t${randomBytes(5).toString('hex')}`;
    const [old, fresh] = [0, 1].map(() => new EtcdLog({ endpoints: etcd.endpointList, cluster })) as [EtcdLog, EtcdLog];
    const raw = new Etcd3({ hosts: etcd.endpointList });
    t.teardown(async () => {
      await Promise.all([old.close(), fresh.close()]);
      raw.close();
    });

    const claim = await old.claimName('n1', 3, 5, CALL_MS);
    if (!claim.taken) return t.fail(`not taken: ${claim.holder}`);
    const lost: string[] = [];
    claim.session.onLost((why) => lost.push(why));
    const [before] = await old.members(CALL_MS);
    t.like(before, { name: 'n1', candidate: { name: 'n1', priority: 3 } });
    await claim.session.beat(CALL_MS);
    const [after] = await fresh.members(CALL_MS);
    t.true(after!.beat > before!.beat, 'the beat moved');
    t.is(after!.candidate!.since, before!.candidate!.since, 'the candidacy stays registered where it was');
    const lease = (await raw.get(`/${cluster}/nodes/n1`).exec()).kvs[0]!.lease;

    t.like(await fresh.claimName('n1', undefined, 5, CALL_MS), { taken: false }, 'a held name is not taken');
    t.like(await fresh.claimName('n1', undefined, 5, CALL_MS, before!.beat), { taken: false }, 'nor one whose holder beat since');
    const taken = await fresh.claimName('n1', undefined, 5, CALL_MS, after!.beat);
    if (!taken.taken) return t.fail(`not taken over: ${taken.holder}`);
    const newLease = (await raw.get(`/${cluster}/nodes/n1`).exec()).kvs[0]!.lease;
    t.not(newLease, lease);
    t.is((await raw.get(`/${cluster}/formats/n1`).exec()).kvs[0]?.lease, newLease, 'the formats moved with the name');
    t.is(await raw.get(`/${cluster}/candidates/n1`).string(), null, 'a candidacy the new claim does not make is gone');
    t.deepEqual(
      (await fresh.members(CALL_MS)).map((m) => [m.name, m.candidate]),
      [['n1', undefined]],
    );
    // The old lease was revoked: nobody can keep it up, and the old holder learns it lost the name.
    await t.throwsAsync(claim.session.beat(CALL_MS), { message: /taken over|gone/ });
    t.is(lost.length, 1);
    t.true(claim.session.lost);
    // Revoked right after the claim, without waiting for it: gone within a few tries.
    const gone = await pollUntil(
      'the old lease to be revoked',
      async () => (Number((await raw.leaseClient.leaseTimeToLive({ ID: lease })).TTL) === -1 ? true : undefined),
      10_000,
    );
    t.true(gone);
    await taken.session.beat(CALL_MS);
  },
);
