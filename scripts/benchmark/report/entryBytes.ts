import type { EntryBytesResult } from '../scenarios/entryBytes.js';
import { num, table } from './format.js';

/** Bytes per entry in a node's memory and in etcd, beside what the limits charge. */
export function renderEntryBytes(e: EntryBytesResult): string[] {
  const out: string[] = [];
  out.push(
    '**Bytes per entry**: a fresh single node and a fresh 3-node cluster per name length, filled with that many owners, each its own key, index and owner of that length ' +
      '(no expiry, no waiter). Resident: RSS growth over the fill (read 2 s after it) per entry; in the cluster n1 / n2 / n3, * the leader. ' +
      "etcd: the largest member's dbSize and dbSizeInUse growth over the fill per entry (the entries then live in the log's retained batches), " +
      "dbSize and dbSizeInUse over their start once the leader's snapshot of the full table was written and the log compacted behind it, and that snapshot's value per entry. " +
      'Charged: what --max-table-bytes counts an entry (names as stored + 256) and what the etcd bound counts (names + 96).' +
      (e.clusterSkipped !== undefined ? ` Cluster rows: skipped (${e.clusterSkipped}).` : ''),
  );
  out.push('');
  const b = (v: number | undefined): string => num(v);
  out.push(
    table(
      [
        'where',
        'name bytes',
        'entries',
        'resident B/entry',
        'charged B/entry',
        'etcd dbSize B/entry',
        'etcd in use B/entry',
        'dbSize once snapshotted',
        'in use once snapshotted',
        'snapshot B/entry',
        'etcd charged',
      ],
      e.rows.map((r) => [
        r.where,
        num(r.nameBytes),
        num(r.entries),
        r.nodes.length === 0 ? `failed: ${(r.error ?? '').split('\n')[0]}` : r.nodes.map((n) => `${b(n.perEntry)}${n.leader === true ? '*' : ''}`).join(' / '),
        num(r.chargedBytes),
        b(r.etcd?.dbSizePerEntry),
        b(r.etcd?.dbSizeInUsePerEntry),
        b(r.etcd?.snapshottedDbSizePerEntry),
        b(r.etcd?.snapshottedInUsePerEntry),
        b(r.etcd?.snapshotBytesPerEntry),
        r.etcdChargedBytes === undefined ? '–' : num(r.etcdChargedBytes),
      ]),
    ),
  );
  const errors = e.rows.filter((r) => r.error !== undefined && r.nodes.length > 0);
  if (errors.length > 0) out.push('', ...errors.map((r) => `- ${r.where}, ${r.nameBytes}-byte names: ${r.error!.split('\n')[0]}`));
  out.push('');
  return out;
}
