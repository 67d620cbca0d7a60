import test from 'ava';
import { EtcdLog } from '../../src/cluster/EtcdLog.js';
import { AppendRefusedError } from '../../src/cluster/ReplicatedLog.js';
import { hasPrefix } from '../../src/cluster/etcd/calls.js';

// How EtcdLog.append classifies a failed call, which decides whether the Committer waits out a
// fence for it. The endpoint pool may try several members within one call (after a fast
// failure); a call is refused for good only if no try of it can still commit. No etcd here: the
// pool is a stand-in whose tries fail as listed, and the writer lease is chosen, not granted.

const NO_LEADER = '14 UNAVAILABLE: etcdserver: no leader';
const NO_ANSWER = 'etcd append did not complete within 500 ms';
const LEASE_GONE = 'etcdserver: requested lease not found';

/**
 * An EtcdLog (never connected) whose pool runs one try per listed error, failing with the last;
 * each try's transaction is kept in `sent`.
 */
function logWhoseTriesFail(errors: readonly string[], sent: unknown[] = []): EtcdLog {
  const log = new EtcdLog({ endpoints: ['http://127.0.0.1:9'], cluster: 'unit' });
  log['writers'].chooseNext('7', 60_000);
  log['janitor']['listedOnce'] = true; // as if it had listed the announcements and found none
  const real = log['pool'];
  const pool = {
    close: () => real.close(),
    async call(_what: string, _timeoutMs: number, work: (endpoint: unknown, options: unknown) => Promise<unknown>): Promise<unknown> {
      let last: unknown;
      for (const message of errors) {
        const txn = (request: unknown): Promise<never> => {
          sent.push(request);
          return Promise.reject(new Error(message));
        };
        const endpoint = { client: { kv: { txn } } };
        last = await work(endpoint, {}).catch((error: unknown) => error);
      }
      throw last;
    },
  };
  Object.assign(log, { pool });
  return log;
}

/** What the lease's seal would revoke: the ids of the leases with sends of unknown outcome. */
const unsettled = (log: EtcdLog): string[] => [...(log['writers']['unsettled'] as Map<string, unknown>).keys()];

test('a call whose every try was refused "no leader" is refused for good; its lease needs no seal', async (t) => {
  const log = logWhoseTriesFail([NO_LEADER, NO_LEADER]);
  await t.throwsAsync(log.append(Buffer.from('x'), 1_000), { instanceOf: AppendRefusedError, message: /no leader/ });
  t.deepEqual(unsettled(log), []);
  await log.close();
});

test('a try without an answer before a "no leader" one may still commit: not refused, and its lease is sealed later', async (t) => {
  const log = logWhoseTriesFail([NO_ANSWER, NO_LEADER]);
  const error = await t.throwsAsync(log.append(Buffer.from('x'), 1_000));
  t.false(error instanceof AppendRefusedError, String(error));
  t.deepEqual(unsettled(log), ['7']);
  await log.close();
});

test('"lease not found" in any try is final: every try named that lease', async (t) => {
  const log = logWhoseTriesFail([NO_ANSWER, LEASE_GONE]);
  await t.throwsAsync(log.append(Buffer.from('x'), 1_000), { instanceOf: AppendRefusedError, message: /lease not found/ });
  t.deepEqual(unsettled(log), []);
  await log.close();
});

test('a call that got no answer is not refused; its lease waits for a seal', async (t) => {
  const log = logWhoseTriesFail([NO_ANSWER]);
  const error = await t.throwsAsync(log.append(Buffer.from('x'), 1_000));
  t.false(error instanceof AppendRefusedError);
  t.deepEqual(unsettled(log), ['7']);
  await log.close();
});

test('each try of one call puts its batch under a retained key of its own: two tries that both commit are two batches to catch up from', async (t) => {
  const sent: unknown[] = [];
  const log = logWhoseTriesFail([NO_ANSWER, NO_ANSWER], sent);
  await t.throwsAsync(log.append(Buffer.from('batch'), 1_000));
  const retainedPrefix = Buffer.from('/unit/batches/');
  const retainedKeys = sent.map((request) => {
    const puts = (request as { success: Array<{ request_put?: { key: Buffer; value: Buffer } }> }).success.flatMap((op) =>
      op.request_put === undefined ? [] : [op.request_put],
    );
    const retained = puts.filter((put) => hasPrefix(put.key, retainedPrefix));
    t.is(retained.length, 1, 'one retained put per try');
    t.deepEqual(retained[0]!.value, Buffer.from('batch'));
    return retained[0]!.key.toString('latin1');
  });
  t.is(retainedKeys.length, 2);
  t.not(retainedKeys[0], retainedKeys[1]);
  await log.close();
});
