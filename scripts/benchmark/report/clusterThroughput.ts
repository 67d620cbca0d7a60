import type { BenchResults } from '../results.js';
import type { ClusterThroughputRow, EtcdGoRow } from '../scenarios/clusterThroughput.js';
import { cores, cpu, num, table } from './format.js';

/** What an etcd client measured, as one row of the cluster throughput table needs it. */
interface ClientFigures {
  readonly etcdCpuCores: ReadonlyArray<number | undefined>;
  readonly clientCpuCores: number;
  readonly hostStolenShare?: number;
}

/** One etcd-client row of the cluster throughput table: the client's own latencies and failures, etcd's CPU and its own. */
function clientCells(
  label: string,
  count: number,
  ops: string,
  latency: { readonly p50: number; readonly p99: number; readonly p999: number } | undefined,
  r: ClientFigures | undefined,
  wrong: number | undefined,
): string[] {
  return [
    label,
    num(count),
    '1',
    ops,
    num(latency?.p50, 2),
    num(latency?.p99, 2),
    num(latency?.p999, 2),
    '–',
    cores(r?.etcdCpuCores),
    cpu(r?.clientCpuCores),
    cpu(r?.hostStolenShare),
    num(wrong),
  ];
}

/** One Go-client row of the cluster throughput table. */
function goCells(label: string, row: EtcdGoRow): string[] {
  const r = row.result;
  const ops = r === undefined ? '–' : r.mode === 'lock' ? `${num(r.opsPerSecond)} (${num(r.cyclesPerSecond)} cycles/s)` : num(r.opsPerSecond);
  return clientCells(label, row.concurrency, row.error !== undefined ? `failed: ${row.error.split('\n')[0]}` : ops, r?.latencyMs, r, r?.errors);
}

/** Ours beside etcd's lock and raw Puts with etcd's Go client, and beside the etcd3 npm client, at each count. */
function renderVersusGo(results: BenchResults): string[] {
  const c = results.cluster!;
  const ratio = (a: number | undefined, b: number | undefined): string => (a === undefined || b === undefined || b === 0 ? '–' : `${num(a / b, 2)}×`);
  const rows: string[][] = [];
  for (const connections of results.config.clusterConnections) {
    const lock = c.etcdGo?.lock.find((r) => r.concurrency === connections)?.result;
    const put = c.etcdGo?.put.find((r) => r.concurrency === connections)?.result;
    const npm = c.etcdLock?.find((r) => r.lockers === connections)?.result;
    for (const row of c.throughput?.filter((r) => r.connections === connections) ?? []) {
      const ours = row.result?.opsPerSecond;
      const sequenced = c.sequencedCeiling?.find((r) => r.connections === connections && r.depth === row.depth)?.result;
      const direct = c.ceiling?.find((r) => r.connections === connections && r.depth === row.depth)?.result?.opsPerSecond;
      rows.push([
        num(connections),
        num(row.depth),
        num(ours),
        num(row.result?.latencyMs.p99, 2),
        num(sequenced?.opsPerSecond),
        num(sequenced?.latencyMs.p99, 2),
        ratio(ours, sequenced?.opsPerSecond),
        num(direct),
        ratio(ours, direct),
        num(lock?.opsPerSecond),
        ratio(ours, lock?.opsPerSecond),
        num(put?.opsPerSecond),
        ratio(ours, put?.opsPerSecond),
        num(npm?.opsPerSecond),
        ratio(ours, npm?.opsPerSecond),
      ]);
    }
  }
  return [
    "**Ours against etcd's Go client**: ops/s of each of our rows ÷ the etcd rows at the same count (etcd's rows are unpipelined: one call in flight per locker or writer). " +
      "Our nodes forward their batches to the leader's sequencer (the default), so the first ceiling beside them is the same load on three null cluster nodes " +
      'committing through one sequencer: a round through etcd without our code, built as ours is, **the ceiling of our design on this machine**. ' +
      'Then three null nodes each appending its own batches: the ceiling of the old default (every node appending for itself), for comparison.',
    '',
    table(
      [
        'conns',
        'pipeline',
        'ours ops/s',
        'ours p99 ms',
        "null nodes, one sequencer (our design's ceiling) ops/s",
        'its p99 ms',
        'ours / that ceiling',
        "null nodes each appending (old default's ceiling) ops/s",
        'ours / that ceiling',
        'etcd lock, Go client, ops/s',
        'ours / Go lock',
        'etcd put, Go client, puts/s',
        'ours / raw put',
        'etcd lock, etcd3 npm, ops/s',
        'ours / etcd3 lock',
      ],
      rows,
    ),
  ];
}

/**
 * Where our nodes' appends went in their rows, from the nodes' own `append-route` lines: one
 * sentence when every row ran as designed (one node leading with its own sequencer, the others
 * forwarding their batches to it, no route changed inside a window, no link failed), else each row.
 */
export function describeAppendRoutes(rows: readonly ClusterThroughputRow[]): string | undefined {
  const measured = rows.filter((r): r is ClusterThroughputRow & { appendRoutes: readonly string[] } => r.appendRoutes !== undefined);
  if (measured.length === 0) return undefined;
  const via = (route: string): string[] => route.split(' ').slice(1);
  const designed = (routes: readonly string[]): boolean => {
    const sequencers = routes.filter((r) => via(r)[0] === 'own-sequencer');
    const targets = new Set(routes.filter((r) => via(r)[0] === 'forwarded').map((r) => via(r)[1]));
    return sequencers.length === 1 && targets.size === 1 && routes.every((r) => ['own-sequencer', 'forwarded'].includes(via(r)[0]!));
  };
  if (measured.every((r) => designed(r.appendRoutes) && (r.routeChangesInWindow ?? 0) === 0 && (r.linkTrouble ?? []).length === 0)) {
    const leaders = new Set(measured.map((r) => r.appendRoutes.find((x) => via(x)[0] === 'own-sequencer')!.split(' ')[0]));
    const targets = new Set(measured.flatMap((r) => r.appendRoutes.filter((x) => via(x)[0] === 'forwarded').map((x) => via(x)[1])));
    return (
      `Our nodes' appends (their append-route lines): in every row ${[...leaders].join(', ')} led and appended through its own sequencer, ` +
      `the other nodes forwarded their batches to it over its lock port (${[...targets].join(', ')}); no route changed inside a window and no link between nodes failed.`
    );
  }
  return (
    "Our nodes' appends (their append-route lines), at the end of each row, with route changes inside its window and link trouble during it: " +
    measured
      .map((r) => {
        const changes = r.routeChangesInWindow ? `; ${num(r.routeChangesInWindow)} change(s) in the window` : '';
        const trouble =
          (r.linkTrouble ?? []).length > 0 ? `; ${(r.linkTrouble ?? []).slice(0, 3).join(' | ')}${(r.linkTrouble ?? []).length > 3 ? ' …' : ''}` : '';
        return `${num(r.connections)}×${num(r.depth)}: ${r.appendRoutes.join(', ')}${changes}${trouble}`;
      })
      .join('; ') +
    '.'
  );
}

/** The cluster throughput rows: ours, the null nodes and etcd's lock and Puts at each count, then ours against etcd's Go client. */
export function renderClusterThroughput(results: BenchResults): string[] {
  const c = results.cluster!;
  const out: string[] = [];
  const go = c.etcdGo;
  out.push(
    '**Cluster throughput and latency**: request+release cycles on random keys, connections spread evenly over the 3 nodes; one op = one command and its reply. ' +
      "Our nodes forward their batches to the leader's sequencer over its lock port (the default; no flag), which appends every node's batches in one write. " +
      'Beside ours at each shape (one right after the other, in every order in turn), the same load on three null cluster nodes (`targets/nullClusterNode.ts`: frames batched and committed through `EtcdLog` ' +
      'as a node does, answered with canned replies when the batch comes back on the watch; no decode, no table, no snapshots) ' +
      'that commit through one sequencer as ours do (the others forward their batches to it over loopback, it appends all it has in one transaction, one append in flight, ' +
      'waiting up to 5 ms after each for a batch of every node): **the ceiling of our design on this machine**; and on three that each append their own batches: ' +
      'the ceiling of the old default, every node appending for itself. ' +
      'Right after ours at each count, on the same etcd and in the same windows: ' +
      "etcd's lock with etcd's Go client (`concurrency.NewMutex(session, name).Lock` then `.Unlock`, what `etcdctl lock` calls; one session and one name per locker; 2 ops per cycle), " +
      "raw Puts with the Go client (as many writers, each its own key; 1 op per Put), and etcd's lock with the `etcd3` npm client " +
      '(`client.lock(name).acquire()` then `.release()`, each locker on its own name; 2 ops per cycle). ' +
      'CPU: share of one core during the window (n1 / n2 / n3, m1 / m2 / m3). ' +
      "Stolen: share of the machine's CPU time the hypervisor gave to others during the window (steal in /proc/stat); on a shared VM the same load's rate swings with it.",
  );
  out.push('');
  const rows: string[][] = [];
  for (const connections of results.config.clusterConnections) {
    const shapes = [...(c.throughput ?? []), ...(c.ceiling ?? []), ...(c.sequencedCeiling ?? [])]
      .filter((r) => r.connections === connections)
      .map((r) => r.depth);
    for (const depth of [...new Set(shapes)]) {
      for (const [label, row] of [
        ['cluster', c.throughput?.find((r) => r.connections === connections && r.depth === depth)],
        ["null cluster nodes, one sequencer (our design's ceiling)", c.sequencedCeiling?.find((r) => r.connections === connections && r.depth === depth)],
        ["null cluster nodes, each appending (old default's ceiling)", c.ceiling?.find((r) => r.connections === connections && r.depth === depth)],
      ] as const) {
        if (row === undefined) continue;
        const r = row.result;
        rows.push([
          label,
          num(connections),
          num(row.depth),
          row.error !== undefined ? `failed: ${row.error.split('\n')[0]}` : num(r?.opsPerSecond),
          num(r?.latencyMs.p50, 2),
          num(r?.latencyMs.p99, 2),
          num(r?.latencyMs.p999, 2),
          cores(row.nodeCpuCores),
          cores(row.etcdCpuCores),
          cpu(r?.generatorCpuCores),
          cpu(r?.hostStolenShare),
          num(r?.errors),
        ]);
      }
    }
    for (const [label, row] of [
      ['etcd lock, Go client', go?.lock.find((r) => r.concurrency === connections)],
      ['etcd put, Go client', go?.put.find((r) => r.concurrency === connections)],
    ] as const) {
      if (row !== undefined) rows.push(goCells(label, row));
    }
    const e = c.etcdLock?.find((r) => r.lockers === connections);
    if (e !== undefined) {
      const r = e.result;
      rows.push(
        clientCells(
          'etcd lock, etcd3 npm client',
          connections,
          e.error !== undefined ? `failed: ${e.error.split('\n')[0]}` : `${num(r?.opsPerSecond)} (${num(r?.cyclesPerSecond)} cycles/s)`,
          r?.cycleMs,
          r,
          r?.failures,
        ),
      );
    }
  }
  out.push(
    table(
      ['what', 'conns / lockers', 'pipeline', 'ops/s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'node CPU', 'etcd CPU', 'client CPU', 'stolen', 'wrong / failed'],
      rows,
    ),
  );
  out.push('', "etcd's lock latencies are of a whole cycle (acquire + release); the Go client's put latencies of one Put.", '');
  const routes = describeAppendRoutes(c.throughput ?? []);
  if (routes !== undefined) out.push(routes, '');
  if (go?.skipped !== undefined) out.push(`etcd Go client rows: skipped: ${go.skipped}.`, '');
  if (c.sequencedCeilingError !== undefined) out.push(`Null cluster nodes, one sequencer: failed to start: ${c.sequencedCeilingError.split('\n')[0]}.`, '');
  if (c.ceilingError !== undefined) out.push(`Null cluster nodes, each appending: failed to start: ${c.ceilingError.split('\n')[0]}.`, '');
  const serial = go?.serial;
  if (serial !== undefined) {
    const r = serial.result;
    out.push(
      serial.error !== undefined || r === undefined
        ? `etcd's serial commit latency (one writer, Go client): failed: ${(serial.error ?? 'no result').split('\n')[0]}`
        : `etcd's serial commit latency (one writer, Go client, serial ${num(r.valueBytes)}-byte Puts to one key, before the rows above): ` +
            `p50 ${num(r.latencyMs.p50, 2)} ms, p99 ${num(r.latencyMs.p99, 2)} ms, p99.9 ${num(r.latencyMs.p999, 2)} ms, ${num(r.opsPerSecond)} Puts/s, ${num(r.errors)} errors.`,
      '',
    );
  }
  if (go !== undefined && go.skipped === undefined && c.throughput !== undefined) out.push(...renderVersusGo(results), '');
  return out;
}
