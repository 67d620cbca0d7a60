import { checkClusterGoals, checkClusterSequencerGoals, checkGoals } from './goals.js';
import type { LoadResult } from './load/runLoad.js';
import type { BenchResults } from './results.js';
import type { ContentionResult } from './scenarios/contention.js';
import { SETUP_LABELS, WAY_LABELS, type HandoffResult, type Spread } from './scenarios/handoff.js';
import { WAITERS_CASE_LABELS, type IdleWaitersResult, type WaitersCase } from './scenarios/idleWaiters.js';
import type { ClusterReleaseAllResult, WindowMs } from './scenarios/clusterReleaseAll.js';
import type { ClusterThroughputRow, EtcdGoRow } from './scenarios/clusterThroughput.js';
import type { EntryBytesResult } from './scenarios/entryBytes.js';
import type { ThroughputRow } from './scenarios/matrix.js';
import type { RandomKeysRow } from './scenarios/randomKeys.js';

function num(value: number | undefined, digits = 0): string {
  if (value === undefined || !Number.isFinite(value)) return '–';
  return value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

function mb(bytes: number | undefined): string {
  return bytes === undefined ? '–' : num(bytes / 2 ** 20);
}

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

function rowFor(rows: ThroughputRow[] | undefined, connections: number, depth: number): LoadResult | undefined {
  return rows?.find((r) => r.connections === connections && r.depth === depth)?.result;
}

function cpu(value: number | undefined): string {
  return value === undefined ? '–' : `${num(value * 100)}%`;
}

/** The whole run as markdown: context, one table per scenario, then the targets. */
export function renderMarkdown(results: BenchResults): string {
  const out: string[] = [];
  const m = results.machine;
  out.push(`### LockServer benchmark, ${results.startedAt.slice(0, 16).replace('T', ' ')} UTC`);
  out.push('');
  out.push(`Machine: ${m.cpus} × ${m.cpuModel}, ${num(m.totalMemoryBytes / 2 ** 30)} GiB RAM, ${m.os}, Node ${m.node}. ${m.note}`);
  const loads = results.loadAverages;
  if (loads.length > 0) {
    out.push(`1-minute load average around the scenarios: ${loads.map((l) => `${l.scenario} ${num(l.before, 2)}→${num(l.after, 2)}`).join(', ')}.`);
  }
  out.push(`Command: \`${results.command}\``);
  const build = results.serverBuild;
  if (build !== undefined) {
    out.push(`Server: ${build.root}${build.commit !== undefined ? ` at ${build.commit}${build.modified === true ? ' with uncommitted changes' : ''}` : ''}.`);
  }
  out.push('');

  if (results.throughput !== undefined || results.ceiling !== undefined || results.redis !== undefined) {
    out.push(
      `**Throughput and latency**: request+release cycles on distinct keys, closed loop; one op = one command and its reply. ` +
        `Each cell is the median of ${results.config.repeats} round(s); in each round every column ran right after the others.`,
    );
    out.push('');
    const shapes: Array<[number, number]> = [];
    for (const c of results.config.connections) for (const p of results.config.pipelines) shapes.push([c, p]);
    const redisSkipped = results.redis?.skipped;
    out.push(
      table(
        [
          'conns',
          'pipeline',
          'ops/s',
          'p50 ms',
          'p99 ms',
          'p99.9 ms',
          'server CPU',
          'gen CPU',
          'stolen',
          'Redis SET NX PX (redis-benchmark) ops/s',
          'ours / Redis',
          'Redis SET NX PX+DEL (our generator) ops/s',
          'null server (generator ceiling) ops/s',
        ],
        shapes.map(([c, p]) => {
          const ours = rowFor(results.throughput, c, p);
          const bench = results.redis?.redisBenchmark.find((r) => r.connections === c && r.pipeline === p);
          const benchOps = bench !== undefined && 'opsPerSecond' in bench ? bench.opsPerSecond : undefined;
          const gen = rowFor(results.redis?.ourGenerator, c, p);
          const ceiling = rowFor(results.ceiling, c, p);
          const skipped = redisSkipped !== undefined ? 'skipped' : '–';
          return [
            num(c),
            num(p),
            num(ours?.opsPerSecond),
            num(ours?.latencyMs.p50, 3),
            num(ours?.latencyMs.p99, 3),
            num(ours?.latencyMs.p999, 3),
            cpu(ours?.serverCpuCores),
            cpu(ours?.generatorCpuCores),
            cpu(ours?.hostStolenShare),
            benchOps === undefined ? skipped : num(benchOps),
            ours !== undefined && benchOps !== undefined ? num(ours.opsPerSecond / benchOps, 2) : skipped,
            gen === undefined ? skipped : num(gen.opsPerSecond),
            num(ceiling?.opsPerSecond),
          ];
        }),
      ),
    );
    if (redisSkipped !== undefined) out.push('', `Redis: skipped (${redisSkipped}).`);
    const errors = (results.throughput ?? []).reduce((sum, r) => sum + (r.result?.errors ?? 0), 0);
    out.push(
      '',
      `Unexpected replies in our runs: ${num(errors)}. CPU columns: share of one core used by our server and by the load generator during the window; stolen: share of the machine's CPU time the hypervisor gave to others in that window.`,
    );
    out.push('');
  }

  if (results.random !== undefined) out.push(...renderRandomKeys(results), '');

  const contention = results.contention;
  if (contention !== undefined) {
    out.push(`**Contention**: ${contention.contenders} clients poll one (key, index) with request (0x02) until they own it, then release.`);
    out.push('');
    out.push(contentionTable(contention));
    out.push('');
  }

  if (results.held !== undefined) {
    out.push('**Scale: held locks** (each on its own key with its own owner, no expiry), then the loads on other keys.');
    out.push('');
    const shapes = results.config.heldLoads;
    const empty = results.held.find((r) => r.held === 0);
    out.push(
      table(
        [
          'held locks',
          'fill ops/s',
          'RSS after fill MB',
          'RSS after load MB',
          ...shapes.flatMap((s) => [`${s.connections}×${s.depth} ops/s`, `${s.connections}×${s.depth} p99 ms`, 'vs empty']),
        ],
        results.held.map((r) => [
          num(r.held),
          r.held === 0 ? '–' : num(r.fillPerSecond),
          mb(r.rssBytes.filled),
          mb(r.rssBytes.afterLoad),
          ...shapes.flatMap((s) => {
            const load = r.loads.find((l) => l.shape.connections === s.connections && l.shape.depth === s.depth)?.result;
            const base = empty?.loads.find((l) => l.shape.connections === s.connections && l.shape.depth === s.depth)?.result;
            return [num(load?.opsPerSecond), num(load?.latencyMs.p99, 2), load && base ? `${num((load.opsPerSecond / base.opsPerSecond) * 100)}%` : '–'];
          }),
        ]),
      ),
    );
    out.push('');
  }

  const facts: string[] = [];
  if (results.list !== undefined) {
    const l = results.list;
    facts.push(
      `List (0x07) of one key with ${num(l.entries)} entries (${num(l.indexes)} indexes): p50 ${num(l.ms.p50, 2)} ms, max ${num(l.ms.max, 2)} ms over ${l.calls} calls, reply ${num(l.replyBytes)} bytes.`,
    );
  }
  if (results.fairness !== undefined) {
    const f = results.fairness;
    facts.push(
      `Fairness: one connection pipelines ${num(f.listRequests)} lists of a ${num(f.entries)}-entry key (${num(f.listReplyBytes)} bytes each) in one write and reads at full speed (${num(f.heavyMs / 1000, 1)} s); ` +
        `another sending stats every 10 ms waited p50 ${num(f.statsMs.p50, 2)} ms, p99 ${num(f.statsMs.p99, 2)} ms, worst ${num(f.statsMs.max, 2)} ms over ${num(f.statsCalls)} calls.`,
    );
  }
  if (results.expiry !== undefined) {
    const e = results.expiry;
    facts.push(
      `Expiry of ${num(e.locks)} locks due in the same millisecond: ${e.allExpired ? `table empty after ${num(e.sweepMs)} ms` : 'the sweep did not finish in the window'}; ` +
        `worst reply of a 50-connection serving load during the sweep ${num(e.worstDuringSweepMs, 1)} ms (before it: ${num(e.worstBeforeSweepMs, 1)} ms); ` +
        `serving ${num(e.opsPerSecondDuringSweep)} ops/s during vs ${num(e.opsPerSecondBeforeSweep)} before.`,
    );
  }
  if (results.releaseAll !== undefined) {
    const r = results.releaseAll;
    facts.push(
      `Release-all of ${num(r.locks)} locks with a waiter behind each: answered after ${num(r.releaseMs)} ms; meanwhile, beside a 50-connection serving load, ` +
        `other clients were answered p50 ${num(r.probeMs.p50, 2)} ms, p99 ${num(r.probeMs.p99, 2)} ms, worst ${num(r.probeMs.max, 2)} ms over ${num(r.probeCalls)} calls ` +
        `(before it: p99 ${num(r.probeBeforeMs.p99, 2)} ms)` +
        (r.tableBefore !== undefined && r.tableAfter !== undefined
          ? `; owners + waiters ${num(r.tableBefore.owners)} + ${num(r.tableBefore.waiters)} before, ${num(r.tableAfter.owners)} + ${num(r.tableAfter.waiters)} after.`
          : '.'),
    );
  }
  if (results.idle !== undefined) {
    const i = results.idle;
    facts.push(
      `${num(i.opened)} idle connections: RSS ${mb(i.rssBytes.before)} → ${mb(i.rssBytes.idle)} MB (${num((i.bytesPerConnection ?? NaN) / 1024, 1)} KiB each); ` +
        `a busy client meanwhile: p50 ${num(i.probeMs.p50, 3)} ms, p99 ${num(i.probeMs.p99, 3)} ms.`,
    );
  }
  if (results.entryBytes !== undefined) out.push(...renderEntryBytes(results.entryBytes));
  if (facts.length > 0) {
    out.push('**Scale: list, fairness, mass expiry, release-all, idle connections**');
    out.push('');
    for (const f of facts) out.push(`- ${f}`);
    out.push('');
  }

  const singleNode = ['throughput', 'contention', 'held', 'list', 'fairness', 'expiry', 'release-all', 'entry-bytes', 'idle', 'redis', 'ceiling'];
  const met = (g: { met: boolean | undefined }): string => (g.met === undefined ? '–' : g.met ? 'met' : '**missed**');
  if (results.config.scenarios.some((s) => singleNode.includes(s))) {
    const goals = checkGoals(results);
    out.push('**Targets** (issue 3)');
    out.push('');
    out.push(
      table(
        ['target', 'measured', 'met'],
        goals.map((g) => [g.goal, g.measured, met(g)]),
      ),
    );
    out.push('');
  }
  if (results.cluster !== undefined) {
    out.push(...renderCluster(results));
    out.push('**Cluster targets** (issue 9)');
    out.push('');
    out.push(
      table(
        ['target', 'measured', 'met'],
        checkClusterGoals(results).map((g) => [g.goal, g.measured, met(g)]),
      ),
    );
    out.push('');
    out.push(
      "**Cluster targets against etcd's Go client** (issue 36; ours as every node runs by default, forwarding to the leader's sequencer; " +
        "beside each, the null nodes committing through one sequencer: our design's ceiling, same run)",
    );
    out.push('');
    out.push(
      table(
        ['target', 'measured', 'met'],
        checkClusterSequencerGoals(results).map((g) => [g.goal, g.measured, met(g)]),
      ),
    );
  }
  if (results.handoff !== undefined) out.push('', ...renderHandoff(results.handoff));
  if (results.errors.length > 0) {
    out.push('', '**Failures**', '');
    for (const e of results.errors) out.push(`- ${e.scenario}: ${e.message.split('\n')[0]}`);
  }
  return out.join('\n') + '\n';
}

/** The random-keys workload (issue 10): ours, the null server and Redis under one generator. */
function renderRandomKeys(results: BenchResults): string[] {
  const out: string[] = [];
  const rows = results.random ?? [];
  out.push(
    `**Random keys** (issue 10): each connection alternates request and release on a key drawn uniformly from a key space shared by all ` +
      `connections (index "row", owner "client<N>"); Redis gets the same generator with SET key owner NX PX 30000, then DEL. ` +
      `Fresh servers per key space; each cell is the median of ${results.config.repeats} round(s), every column right after the others in each round. ` +
      `"Server CPU µs/op": CPU time the server process used per op during the window, which depends far less than ops/s on what else the machine runs. ` +
      `"Contended": replies that found the key held by another connection (queued / SET NX refused), ours then Redis.`,
  );
  out.push('');
  const cellOf = (row: RandomKeysRow, lane: string, c: number, p: number): LoadResult | undefined =>
    row.cells.find((x) => x.lane === lane && x.shape.connections === c && x.shape.depth === p)?.result;
  const lines: string[][] = [];
  for (const row of rows) {
    for (const shape of results.config.randomLoads) {
      const ours = cellOf(row, 'ours', shape.connections, shape.depth);
      const nul = cellOf(row, 'null-server', shape.connections, shape.depth);
      const redis = cellOf(row, 'redis', shape.connections, shape.depth);
      lines.push([
        num(row.keySpace),
        num(shape.connections),
        num(shape.depth),
        num(ours?.opsPerSecond),
        num(ours?.latencyMs.p99, 3),
        cpu(ours?.serverCpuCores),
        num(nul?.opsPerSecond),
        ours && nul ? num(ours.opsPerSecond / nul.opsPerSecond, 2) : '–',
        num(redis?.opsPerSecond),
        ours && redis ? num(ours.opsPerSecond / redis.opsPerSecond, 2) : '–',
        `${num(cpuMicros(ours), 2)} / ${num(cpuMicros(nul), 2)} / ${num(cpuMicros(redis), 2)}`,
        `${num(ours?.contended)} / ${num(redis?.contended)}`,
      ]);
    }
  }
  out.push(
    table(
      [
        'key space',
        'conns',
        'pipeline',
        'ours ops/s',
        'ours p99 ms',
        'server CPU',
        'null server ops/s',
        'ours / null',
        'Redis SET NX PX+DEL ops/s',
        'ours / Redis',
        'server CPU µs/op: ours / null / Redis',
        'contended',
      ],
      lines,
    ),
  );
  out.push('');
  out.push(...renderRandomTargets(results), '');
  for (const row of rows) {
    out.push(
      `- ${num(row.keySpace)} keys: our RSS ${mb(row.rssBytes.started)} MB at start, ${mb(row.rssBytes.afterLoad)} MB when the load stopped, ` +
        `${mb(row.rssBytes.settled)} MB ${num(row.settleMs / 1000)} s later (no lock held).`,
    );
  }
  return out;
}

/** Server CPU time per op in µs, from a load result. */
function cpuMicros(result: LoadResult | undefined): number | undefined {
  if (result === undefined || result.serverCpuCores === undefined || result.opsPerSecond === 0) return undefined;
  return (result.serverCpuCores / result.opsPerSecond) * 1e6;
}

/** Issue 10's targets, from the random-keys rows (and the held-locks rows for the 1M-lock RSS). */
function renderRandomTargets(results: BenchResults): string[] {
  const rows = results.random ?? [];
  const at = (keySpace: number, lane: string, depth: number): LoadResult | undefined =>
    rows.find((r) => r.keySpace === keySpace)?.cells.find((c) => c.lane === lane && c.shape.connections === 50 && c.shape.depth === depth)?.result;
  const ratio = (a: LoadResult | undefined, b: LoadResult | undefined): number | undefined =>
    a === undefined || b === undefined ? undefined : a.opsPerSecond / b.opsPerSecond;
  const check = (goal: string, measured: number | undefined, met: (value: number) => boolean, text: (value: number) => string): string[] => [
    goal,
    measured === undefined ? 'not measured' : text(measured),
    measured === undefined ? '–' : met(measured) ? 'yes' : '**no**',
  ];
  const settled = rows.find((r) => r.keySpace === 10_000_000)?.rssBytes.settled;
  const million = results.held?.find((r) => r.held === 1_000_000)?.rssBytes.filled;
  return [
    '**Targets** (issue 10)',
    '',
    table(
      ['target', 'measured', 'met'],
      [
        check(
          '50×16, 100k random keys: ours / Redis (same cycle, same generator) ≥ 1.0',
          ratio(at(100_000, 'ours', 16), at(100_000, 'redis', 16)),
          (v) => v >= 1,
          (v) => num(v, 2),
        ),
        check(
          '50×1, 100k random keys: ours / null server ≥ 0.95',
          ratio(at(100_000, 'ours', 1), at(100_000, 'null-server', 1)),
          (v) => v >= 0.95,
          (v) => num(v, 2),
        ),
        check(
          'RSS after a 10M-key random run, settled, no lock held ≤ 100 MB',
          settled,
          (v) => v <= 100 * 2 ** 20,
          (v) => `${mb(v)} MB`,
        ),
        check(
          'RSS with 1,000,000 held locks ≤ 300 MB',
          million,
          (v) => v <= 300 * 2 ** 20,
          (v) => `${mb(v)} MB`,
        ),
      ],
    ),
  ];
}
/** One row per contention round: speed of the handovers and whether the order was kept. */
function contentionTable(contention: ContentionResult): string {
  return table(
    [
      'round',
      'handovers',
      'handovers/s',
      'handover p50 ms',
      'handover p99 ms',
      'polls/s',
      'order concordance',
      'in promised place',
      'priority inversions',
      'arrival inversions',
    ],
    contention.rounds.map((r, i) => [
      `${i + 1}${r.completed ? '' : ' (cut short)'}`,
      num(r.handovers),
      num(r.handoversPerSecond),
      num(r.handoverMs.p50, 2),
      num(r.handoverMs.p99, 2),
      num(r.pollsPerSecond),
      num(r.fairness.concordance, 3),
      `${num(r.fairness.inPlace)}/${num(r.fairness.compared)}`,
      num(r.fairness.priorityInversions),
      num(r.fairness.arrivalInversions),
    ]),
  );
}

/** One Go-client row of the cluster throughput table. */
function goCells(label: string, row: EtcdGoRow): string[] {
  const r = row.result;
  const ops = r === undefined ? '–' : r.mode === 'lock' ? `${num(r.opsPerSecond)} (${num(r.cyclesPerSecond)} cycles/s)` : num(r.opsPerSecond);
  return [
    label,
    num(row.concurrency),
    '1',
    row.error !== undefined ? `failed: ${row.error.split('\n')[0]}` : ops,
    num(r?.latencyMs.p50, 2),
    num(r?.latencyMs.p99, 2),
    num(r?.latencyMs.p999, 2),
    '–',
    cores(r?.etcdCpuCores),
    cpu(r?.clientCpuCores),
    cpu(r?.hostStolenShare),
    num(r?.errors),
  ];
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

function cores(values: ReadonlyArray<number | undefined> | undefined): string {
  if (values === undefined || values.length === 0) return '–';
  return values.map((v) => cpu(v)).join(' / ');
}

/** The cluster scenarios: throughput beside etcd's lock, contention, failover, scale. */
function renderCluster(results: BenchResults): string[] {
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
  if (c.throughput !== undefined || nullRan || c.etcdLock !== undefined || go !== undefined) {
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
        rows.push([
          'etcd lock, etcd3 npm client',
          num(connections),
          '1',
          e.error !== undefined ? `failed: ${e.error.split('\n')[0]}` : `${num(r?.opsPerSecond)} (${num(r?.cyclesPerSecond)} cycles/s)`,
          num(r?.cycleMs.p50, 2),
          num(r?.cycleMs.p99, 2),
          num(r?.cycleMs.p999, 2),
          '–',
          cores(r?.etcdCpuCores),
          cpu(r?.clientCpuCores),
          cpu(r?.hostStolenShare),
          num(r?.failures),
        ]);
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
  }
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

/** p50 / p99 / max ms (calls) of one probe window. */
function windowCell(w: WindowMs): string {
  return w.calls === 0 ? 'no call' : `${num(w.p50, 1)} / ${num(w.p99, 1)} / ${num(w.max, 1)} (${num(w.calls)})`;
}

/** The cluster's release-all: other clients' waits per node, before, while and after each node applied it. */
function renderClusterReleaseAll(r: ClusterReleaseAllResult): string[] {
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

/** Bytes per entry in a node's memory and in etcd, beside what the limits charge. */
function renderEntryBytes(e: EntryBytesResult): string[] {
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

/** A column of handoff tries: median (min–max) ms. */
function spreadCell(s: Spread | undefined, tries: number): string {
  if (s === undefined) return '–';
  const of = s.count < tries ? ` [${s.count} of ${tries}]` : '';
  return `${num(s.median, 1)} (${num(s.min, 1)}–${num(s.max, 1)})${of}`;
}

/** Issue 37: handoff latency, and what idle waiters cost etcd. */
function renderHandoff(h: HandoffResult): string[] {
  const out: string[] = [];
  out.push('#### Handoff (issue 37)', '');
  if (h.rows.length > 0) {
    out.push(
      `**Handoff latency**: an owner holds a lock, a waiter queues behind it, and ${num(h.delayMs.min)}–${num(h.delayMs.max)} ms after the waiter is seen queued ` +
        `(the same delay for every row in a try: ${h.delaysMs.map((d) => num(d)).join(', ')} ms) the owner lets go: ours with a release (0x05) on its connection, ` +
        "etcdctl's owner (`etcdctl lock NAME`) with SIGTERM (it then unlocks), the Go owner with `Unlock`; the clock is read right before. " +
        '**told**: until the waiter knew it owns (lockctl hold --json printed `{"acquired":true}`, the 0x0B reply was read, the Go `Lock` returned); ' +
        "**ran**: until the command the waiter then ran, `sh -c 'date +%s%N'`, read the clock (lockctl: started while it waits, behind a shell its grant lets go; the raw waiter: spawned by the bench; " +
        'etcdctl and Go: exec from Go). Median (min–max) of the tries, ms. ' +
        '`lockctl hold` is the built CLI of this checkout, however it waits: **requests while queued** counts the lock requests its node saw from the ' +
        'waiter between queued and the release (stats, 0x08): its polls (0 for a waiter by 0x0B). ' +
        "**release answered**: until the owner's release was answered (our 0x05 reply, the Go `Unlock` returned): the owner's own commit, for comparison. " +
        `Each try's rows run one right after the other, first row turning each try. Clock check: the bench's wall clock minus Date.now() ${num(h.clockSkewMs.start, 2)} ms at the start` +
        `${h.clockSkewMs.end !== undefined ? `, ${num(h.clockSkewMs.end, 2)} ms at the end` : ''}.`,
    );
    const leaders =
      h.lockLeader !== undefined || h.etcdLeader !== undefined
        ? ` 3-node rows: lockserver leader ${h.lockLeader ?? '?'}, etcd leader ${h.etcdLeader ?? '?'}.`
        : '';
    const versions = [h.etcdVersion !== undefined ? `etcd ${h.etcdVersion}` : undefined, h.goVersion].filter((v) => v !== undefined).join(', ');
    if (leaders !== '' || versions !== '') out.push('', `${versions !== '' ? `${versions}.` : ''}${leaders}`.trim());
    out.push('');
    out.push(
      table(
        ['setup', 'waiter', 'owner / waiter', 'told ms', 'ran ms', 'release answered ms', 'requests while queued', 'failed tries'],
        h.rows.map((r) =>
          r.skipped !== undefined
            ? [SETUP_LABELS[r.setup], WAY_LABELS[r.way], '–', `skipped: ${r.skipped}`, '–', '–', '–', '–']
            : [
                SETUP_LABELS[r.setup],
                WAY_LABELS[r.way],
                r.ends,
                spreadCell(r.told, h.tries),
                spreadCell(r.ran, h.tries),
                spreadCell(r.released, h.tries),
                r.requestsWhileQueued === undefined
                  ? '–'
                  : `${num(r.requestsWhileQueued.median)} (${num(r.requestsWhileQueued.min)}–${num(r.requestsWhileQueued.max)})`,
                num(r.failures),
              ],
        ),
      ),
    );
    const failed = h.rows.flatMap((r) =>
      r.samples.filter((s) => s.error !== undefined).map((s) => `${SETUP_LABELS[r.setup]}, ${WAY_LABELS[r.way]}: ${s.error}`),
    );
    if (failed.length > 0) out.push('', 'Failed tries:', '', ...failed.map((f) => `- ${f}`));
    out.push('');
  }
  if (h.waiters !== undefined) out.push(...renderIdleWaiters(h.waiters));
  return out;
}

/** The busiest gRPC methods of a window: requests/s (messages/s where they differ). */
function busiestMethods(c: WaitersCase): string {
  const methods = Object.entries(c.rates?.byMethod ?? {})
    .sort(([, a], [, b]) => b.messagesPerSecond + b.requestsPerSecond - (a.messagesPerSecond + a.requestsPerSecond))
    .slice(0, 4);
  if (methods.length === 0) return '–';
  return methods
    .map(
      ([name, m]) =>
        `${name} ${num(m.requestsPerSecond, 1)}${Math.abs(m.messagesPerSecond - m.requestsPerSecond) >= 0.05 ? ` (${num(m.messagesPerSecond, 1)} msg)` : ''}`,
    )
    .join(', ');
}

function renderIdleWaiters(w: IdleWaitersResult): string[] {
  const out: string[] = [];
  if (w.skipped !== undefined) return ['**Idle waiters**: skipped (' + w.skipped + ').', ''];
  const cases = w.cases ?? [];
  out.push(
    `**Idle waiters' cost to etcd**: a fresh 3-node cluster on 3 members; ${num(w.waiters)} locks held (TTL 0: their owners send nothing more), then one ` +
      `${num((w.windowMs ?? 0) / 1000, 1)} s window per case, in this order: no waiter, a waiter behind each lock waiting by acquire-and-wait (0x0B, no bound, TTW 0; ` +
      `on connections spread over the 3 nodes), no waiter again, a waiter behind each polling the old way (request 0x02 every ${num((w.pollMs ?? 0) / 1000, 1)} s, TTW 30 s, ` +
      "each from its own phase). From the members' /metrics: **requests/s**, `grpc_server_handled_total` summed over the members " +
      "(unary calls answered; a stream counts when it ends); **messages/s**, `grpc_server_msg_received_total` summed (a stream's messages too: lease keep-alives, watch requests); " +
      '**proposals/s**, the largest increase of `etcd_server_proposals_committed_total` among the members (Raft entries committed: the writes). ' +
      `Lockserver leader ${w.lockLeader ?? '?'}, etcd leader ${w.etcdLeader ?? '?'}.`,
  );
  out.push('');
  const base = cases.find((c) => c.name === 'idle')?.rates;
  const over = (value: number | undefined, baseline: number | undefined): string =>
    value === undefined || baseline === undefined ? '–' : `${value - baseline >= 0 ? '+' : ''}${num(value - baseline, 1)}`;
  out.push(
    table(
      [
        'case',
        'waiters',
        'requests/s',
        'messages/s',
        'proposals/s',
        'over baseline: requests/s, proposals/s',
        'busiest methods, requests/s',
        'node CPU',
        'etcd CPU',
        'client calls in window',
      ],
      cases.map((c) => [
        WAITERS_CASE_LABELS[c.name],
        num(c.waiters),
        c.error !== undefined ? `failed: ${c.error}` : num(c.rates?.requestsPerSecond, 1),
        num(c.rates?.messagesPerSecond, 1),
        num(c.rates?.proposalsPerSecond, 1),
        c.name === 'idle'
          ? '–'
          : `${over(c.rates?.requestsPerSecond, base?.requestsPerSecond)}, ${over(c.rates?.proposalsPerSecond, base?.proposalsPerSecond)}`,
        busiestMethods(c),
        cores(c.cpuCores?.nodes),
        cores(c.cpuCores?.members),
        c.clientCalls === undefined ? '–' : c.name === 'waiting-0x0b' ? `${num(c.clientCalls)} answered (none should be)` : `${num(c.clientCalls)} polls`,
      ]),
    ),
  );
  if ((w.pollErrors ?? 0) > 0) out.push('', `Polls that failed (each stopped its poller): ${num(w.pollErrors)}.`);
  const promise = waitingAddsNothing(cases);
  if (promise !== undefined) out.push('', promise);
  out.push('');
  return out;
}

/** Slack beyond the two idle windows' own spread within which a rate counts as unchanged (per second). */
const IDLE_SLACK_PER_SECOND = 0.5;

/**
 * Issue 37's promise, that waiting adds nothing to an idle cluster's load: the 0x0B window's
 * requests/s and proposals/s each at most the higher of the two idle windows plus their spread
 * and IDLE_SLACK_PER_SECOND. Undefined when a window is missing.
 */
function waitingAddsNothing(cases: readonly WaitersCase[]): string | undefined {
  const rates = (name: WaitersCase['name']) => cases.find((c) => c.name === name)?.rates;
  const [idle, after, waiting] = [rates('idle'), rates('idle-again'), rates('waiting-0x0b')];
  if (idle === undefined || after === undefined || waiting === undefined) return undefined;
  const judge = (field: 'requestsPerSecond' | 'proposalsPerSecond'): [boolean, string] => {
    const high = Math.max(idle[field], after[field]);
    const limit = high + Math.abs(idle[field] - after[field]) + IDLE_SLACK_PER_SECOND;
    return [waiting[field] <= limit, `${num(waiting[field], 1)} against idle ${num(idle[field], 1)} and ${num(after[field], 1)} (limit ${num(limit, 1)})`];
  };
  const [requestsMet, requests] = judge('requestsPerSecond');
  const [proposalsMet, proposals] = judge('proposalsPerSecond');
  const verdict = requestsMet && proposalsMet ? 'met' : '**missed**';
  return (
    `Issue 37's promise, waiting adds nothing to the idle baseline (the 0x0B window at most the higher idle window plus the two idle windows' spread and ${IDLE_SLACK_PER_SECOND}/s): ` +
    `${verdict}: requests/s ${requests}, proposals/s ${proposals}.`
  );
}
