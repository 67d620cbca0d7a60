import type { BenchResults } from '../results.js';
import { renderClusterReleaseAll } from './clusterReleaseAll.js';
import { renderClusterThroughput } from './clusterThroughput.js';
import { contentionTable } from './contention.js';
import { mb, num, table } from './format.js';

/** The cluster scenarios: throughput beside etcd's lock, contention, failover, scale. */
export function renderCluster(results: BenchResults): string[] {
  const c = results.cluster!;
  const out: string[] = [];
  out.push(
    `#### Cluster: 3 etcd members${c.etcdVersion !== undefined ? ` (etcd ${c.etcdVersion}, default settings, fsync on)` : ''} and 3 lockserver nodes on 127.0.0.1`,
  );
  out.push('');
  if (c.skipped !== undefined) {
    out.push(`Every cluster row: skipped (${c.skipped}).`, '');
    return out;
  }
  const go = c.etcdGo;
  const nullRan = c.ceiling !== undefined || c.ceilingError !== undefined || c.sequencedCeiling !== undefined || c.sequencedCeilingError !== undefined;
  if (c.throughput !== undefined || nullRan || c.etcdLock !== undefined || go !== undefined) out.push(...renderClusterThroughput(results));
  const contention = c.contention;
  if (contention !== undefined) {
    out.push(
      `**Cluster contention**: ${contention.contenders} clients spread over the 3 nodes poll one (key, index) with request (0x02) until they own it, then release.`,
    );
    out.push('');
    out.push(contentionTable(contention));
    out.push('');
  }
  const f = c.failover;
  if (f !== undefined) {
    out.push(
      `**Cluster failover**: ${f.clients} clients (${f.clients / 3} per node), each running request, then release, on its own key, reconnecting to its node when the connection drops; ` +
        'the events below happen one after the other under that load. "All served again after": from the event to the end of the last wait longer than 1 s of any client of the other nodes. "Longest wait" is the longest any client of a node that kept running went without a reply, from the event to the end of its window.',
    );
    out.push('');
    out.push(
      table(
        [
          'event',
          "other nodes' clients all served again after (ms)",
          'longest wait, other clients (ms)',
          'clients waiting > 1 s',
          'steady-load longest wait (ms)',
          'own clients served again (ms after ready / SIGCONT)',
          'restart to ready (ms)',
          'wrong replies',
        ],
        f.events.map((e) => [
          e.event,
          e.survivorsBackMs === undefined ? `not within 30,000` : e.survivorsBackMs === 0 ? '0 (none waited > 1 s)' : num(e.survivorsBackMs),
          num(e.survivorsWorstWaitMs),
          `${num(e.survivorsInterrupted)}/${num(e.survivors)}`,
          num(e.baselineWorstWaitMs),
          e.affectedBackMs !== undefined ? num(e.affectedBackMs) : (e.note ?? '–'),
          num(e.restartReadyMs),
          num(e.wrongReplies),
        ]),
      ),
    );
    out.push(
      '',
      `${num(f.cycles)} cycles in all, ${num(f.wrongReplies)} wrong replies${f.wrongExamples.length > 0 ? ` (e.g. ${f.wrongExamples.join('; ')})` : ''}, ${num(f.reconnects)} reconnects.`,
      '',
    );
  }
  const s = c.scale;
  if (s !== undefined) {
    const soak = s.soak;
    out.push(`**Cluster scale**: ${num(s.held)} held locks (each its own key and owner, no expiry) filled through the 3 nodes.`);
    out.push('');
    out.push(
      table(
        [
          'fill ops/s',
          'RSS per node MB',
          'snapshot MB',
          'snapshot ms',
          `${s.restartedNode} restarted (-9) → ready ms`,
          'full-load seconds',
          'load ops/s during',
          'snapshots during',
          'etcd data dir before MB',
          'etcd data dir after MB',
          'of which bbolt db after MB',
        ],
        [
          [
            num(s.fillPerSecond),
            s.nodeRssBytes.map((b) => mb(b)).join(' / '),
            s.snapshot === undefined ? 'none seen' : num(s.snapshot.bytes / 2 ** 20, 1),
            num(s.snapshot?.ms),
            s.restartReadyMs === undefined ? 'not ready' : num(s.restartReadyMs),
            num(soak.seconds),
            soak.error !== undefined ? `failed: ${soak.error.split('\n')[0]}` : num(soak.load?.opsPerSecond),
            num(soak.snapshotsDuring),
            soak.etcdBytesBefore.map((b) => mb(b)).join(' / '),
            soak.etcdBytesAfter.map((b) => mb(b)).join(' / '),
            (soak.etcdDbBytesAfter ?? []).map((b) => mb(b)).join(' / ') || '–',
          ],
        ],
      ),
    );
    out.push(
      '',
      `The full load is 48 connections × pipeline 16 over the 3 nodes, with the ${num(s.held)} locks still held; etcd data dir = the member's bbolt database, WAL and Raft snapshots, per member (m1 / m2 / m3).`,
      '',
    );
  }
  if (c.releaseAll !== undefined) out.push(...renderClusterReleaseAll(c.releaseAll));
  return out;
}
