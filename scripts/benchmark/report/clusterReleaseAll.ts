import type { ClusterReleaseAllResult, WindowMs } from '../scenarios/clusterReleaseAll.js';
import { num, table } from './format.js';

/** p50 / p99 / max ms (calls) of one probe window. */
function windowCell(w: WindowMs): string {
  return w.calls === 0 ? 'no call' : `${num(w.p50, 1)} / ${num(w.p99, 1)} / ${num(w.max, 1)} (${num(w.calls)})`;
}
/** The cluster's release-all: other clients' waits per node, before, while and after each node applied it. */
export function renderClusterReleaseAll(r: ClusterReleaseAllResult): string[] {
  const out: string[] = [];
  const releaser = r.nodes.find((n) => n.releaser)?.node ?? '?';
  const stale = r.nodes.reduce((sum, n) => sum + n.staleInputRefused, 0);
  out.push(
    `**Cluster release-all**: one owner holds ${num(r.locks)} locks with a waiter behind each, imported by n1 (\`--import-lock-file\`; every node showed the whole table ` +
      `${num(r.importMs / 1000, 1)} s after the start${r.importSnapshot !== undefined ? `; the leader's snapshot of it: ${num(r.importSnapshot.bytes / 2 ** 20, 1)} MB in ${num(r.importSnapshot.ms)} ms` : ''}), ` +
      `n1 then restarted as the others run. Under a 48-connection unpipelined serving load over the 3 nodes` +
      `${r.load !== undefined ? ` (${num(r.load.opsPerSecond)} ops/s, p99 ${num(r.load.latencyMs.p99, 1)} ms, worst ${num(r.load.latencyMs.max)} ms, ${num(r.load.errors)} errors)` : r.loadError !== undefined ? ` (failed: ${r.loadError})` : ''}, ` +
      `its release-all (0x06) went through ${releaser} and was answered after ${num(r.releaseMs)} ms. ` +
      `Probes: 2 clients a node asking find-owner (0x01) one at a time, and GET /livez on each node's metrics port (its event loop answering at all); ` +
      `each call counted in the window it was sent in: the 2 s before the send, from the send until that node's stats showed every waiter promoted ("applied"), the 2 s after the last node applied it. ` +
      `p50 / p99 / max ms (calls). \`stale-input-refused\` lines in the nodes' logs over the whole scenario: ${num(stale)}.`,
  );
  out.push('');
  out.push(
    table(
      [
        'node',
        'applied after ms',
        'find-owner before',
        'find-owner during',
        'find-owner after',
        'probe errors',
        '/livez before',
        '/livez during',
        'stale-input-refused',
        'commit-timeout',
      ],
      r.nodes.map((n) => [
        `${n.node}${n.leader ? ' (leader)' : ''}${n.releaser ? ' (releaser)' : ''}`,
        num(n.appliedMs),
        windowCell(n.probe.before),
        windowCell(n.probe.during),
        windowCell(n.probe.after),
        num(n.probe.errors),
        windowCell(n.livez.before),
        windowCell(n.livez.during),
        num(n.staleInputRefused),
        num(n.commitTimeouts),
      ]),
    ),
  );
  out.push('');
  if (r.snapshotWait.length > 0) {
    out.push(
      `While the bench waited for the leader's snapshot of the imported table (no client load), /livez p99 / max ms per node: ` +
        r.snapshotWait.map((w) => `${w.node} ${num(w.livez.p99)} / ${num(w.livez.max)} (${num(w.livez.calls)} calls, ${num(w.errors)} errors)`).join(', ') +
        (r.snapshotWait.some((w) => w.lines.length > 0)
          ? `; the nodes' lines on leadership meanwhile: ${r.snapshotWait.flatMap((w) => w.lines.map((l) => `${w.node} ${l}`)).join('; ')}.`
          : '.'),
      '',
    );
  }
  out.push(
    `Owners + waiters before: ${num(r.tableBefore.owners)} + ${num(r.tableBefore.waiters)}; after, per node: ${r.tableAfter.map((t) => `${t.node} ${num(t.owners)} + ${num(t.waiters)}`).join(', ')} (the serving load's own locks included).` +
      (r.clientTrouble.length > 0
        ? ` Nodes' lines (ms from the send): ${r.clientTrouble.slice(0, 10).join('; ')}${r.clientTrouble.length > 10 ? '; …' : ''}.`
        : ''),
  );
  out.push('');
  return out;
}
