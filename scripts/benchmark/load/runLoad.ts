import { Worker } from 'node:worker_threads';
import { Histogram, type HistogramData } from '../Histogram.js';
import { cpuBetween, readCpu } from '../processes.js';
import type { Protocol } from './framing.js';
import type { Endpoint, GoMessage, LoadWorkerData, LoadWorkerResult, WorkerToParent } from './messages.js';

const WORKER_URL = new URL('./loadWorker.js', import.meta.url);
/** Time the workers get, after the window, to collect the replies already on their way. */
const STOP_GRACE_MS = 5_000;
/** How far ahead of "now" the phase boundaries are set, so every worker hears "go" in time. */
const GO_LEAD_MS = 50;
const CONNECT_CONCURRENCY = 256;
const CONNECT_TIMEOUT_MS = 10_000;
/** Longest any worker may take to connect before the run is abandoned. */
const READY_LIMIT_MS = 60_000;

export interface LoadSpec {
  readonly endpoints: readonly Endpoint[];
  readonly protocol: Protocol;
  readonly connections: number;
  readonly depth: number;
  readonly workers: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  /** The target's pid, to measure how much CPU it used during the window. */
  readonly serverPid?: number;
  /** More processes whose CPU use during the window is reported (a cluster's nodes and etcd members). */
  readonly cpuPids?: ReadonlyArray<number | undefined>;
  readonly timelineSlotMs?: number;
  /** Random keys drawn from this many, shared by all connections (see LoadWorkerData.keySpace). */
  readonly keySpace?: number;
  readonly seed?: number;
}

export interface LoadResult {
  readonly connections: number;
  readonly depth: number;
  readonly workers: number;
  readonly durationMs: number;
  readonly ops: number;
  readonly opsPerSecond: number;
  readonly errors: number;
  /** Random keys: replies that found the key held by another connection. */
  readonly contended: number;
  readonly failedConnections: number;
  readonly abandoned: number;
  readonly latencyMs: { readonly p50: number; readonly p99: number; readonly p999: number; readonly max: number; readonly mean: number };
  readonly latencyUs: HistogramData;
  readonly worstAt: number;
  /** Fewest/most replies a single connection got: a wide gap means some connections starved. */
  readonly connectionOps: { readonly min: number; readonly max: number };
  /** Share of one core used during the window (1 = one core fully busy). */
  readonly serverCpuCores: number | undefined;
  /** Share of one core used by each of spec.cpuPids, in that order. */
  readonly pidCpuCores?: ReadonlyArray<number | undefined>;
  readonly generatorCpuCores: number;
  /**
   * Share of the machine's CPU time the hypervisor gave elsewhere during the window (steal in
   * /proc/stat; undefined off Linux): on a shared VM, what the same load reaches swings with it.
   */
  readonly hostStolenShare?: number;
  readonly measureFrom: number;
  readonly timeline?: { readonly slotMs: number; readonly ops: readonly number[]; readonly worstUs: readonly number[] };
}

/** Splits n connections over w workers as evenly as possible (no worker gets none). */
export function splitConnections(connections: number, workers: number): number[] {
  const used = Math.max(1, Math.min(workers, connections));
  const shares: number[] = [];
  for (let i = 0; i < used; i++) shares.push(Math.floor(connections / used) + (i < connections % used ? 1 : 0));
  return shares;
}

class WorkerHandle {
  readonly worker: Worker;
  private readonly messages: WorkerToParent[] = [];
  private waiting: ((message: WorkerToParent) => void) | undefined;
  private failure: Error | undefined;

  constructor(data: LoadWorkerData) {
    this.worker = new Worker(WORKER_URL, { workerData: data });
    this.worker.on('message', (message: WorkerToParent) => this.deliver(message));
    this.worker.on('error', (error) => this.deliver({ type: 'failed', message: error.message }));
    this.worker.on('exit', (code) => {
      this.failure ??= new Error(`load worker exited with code ${code}`);
      this.deliver({ type: 'failed', message: this.failure.message });
    });
  }

  private deliver(message: WorkerToParent): void {
    if (this.waiting !== undefined) {
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting(message);
    } else {
      this.messages.push(message);
    }
  }

  next(limitMs: number): Promise<WorkerToParent> {
    const queued = this.messages.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting = undefined;
        resolve({ type: 'failed', message: `load worker silent for ${limitMs} ms` });
      }, limitMs);
      this.waiting = (message) => {
        clearTimeout(timer);
        resolve(message);
      };
    });
  }
}

/** Load runs so far in this process; part of each run's key prefix. */
let runs = 0;

/**
 * Runs closed-loop request+release cycles from `workers` threads against the endpoints, and merges
 * what they measured. Bounded: connecting, the window and the collection each have a time limit.
 */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const shares = splitConnections(spec.connections, spec.workers);
  const runTag = `${process.pid.toString(36)}.${(runs++).toString(36)}`;
  const firsts = shares.map((_, i) => shares.slice(0, i).reduce((a, b) => a + b, 0));
  const handles = shares.map(
    (connections, workerId) =>
      new WorkerHandle({
        ...(spec.keySpace !== undefined ? { keySpace: spec.keySpace, seed: spec.seed ?? 1, firstConnection: firsts[workerId] } : {}),
        workerId,
        runTag,
        endpoints: spec.endpoints,
        connections,
        protocol: spec.protocol,
        depth: spec.depth,
        connectConcurrency: CONNECT_CONCURRENCY,
        connectTimeoutMs: CONNECT_TIMEOUT_MS,
        timelineSlotMs: spec.timelineSlotMs ?? 0,
      }),
  );
  try {
    const ready = await Promise.all(handles.map((h) => h.next(READY_LIMIT_MS)));
    const failed = ready.find((m) => m.type !== 'ready');
    if (failed !== undefined) throw new Error(failed.type === 'failed' ? failed.message : 'load worker out of step');

    const start = Date.now() + GO_LEAD_MS;
    const go: GoMessage = {
      type: 'go',
      measureFrom: start + spec.warmupMs,
      measureUntil: start + spec.warmupMs + spec.durationMs,
      stopAt: start + spec.warmupMs + spec.durationMs + STOP_GRACE_MS,
    };
    for (const h of handles) h.worker.postMessage(go);

    const cpu = sampleCpuAt(go.measureFrom, go.measureUntil, spec.serverPid, spec.cpuPids ?? []);
    const finished = await Promise.all(handles.map((h) => h.next(go.stopAt - Date.now() + STOP_GRACE_MS)));
    const results: LoadWorkerResult[] = [];
    for (const m of finished) {
      if (m.type !== 'done') throw new Error(m.type === 'failed' ? m.message : 'load worker out of step');
      results.push(m.result);
    }
    return merge(spec, shares.length, go.measureFrom, results, await cpu);
  } finally {
    await Promise.all(handles.map((h) => h.worker.terminate()));
  }
}

interface CpuUse {
  readonly server: number | undefined;
  readonly others: ReadonlyArray<number | undefined>;
  readonly generator: number;
  readonly stolen: number | undefined;
}

/** CPU used by the target, the other processes and this one (all its threads) between two epoch times. */
async function sampleCpuAt(from: number, until: number, serverPid: number | undefined, pids: ReadonlyArray<number | undefined>): Promise<CpuUse> {
  const sleepUntil = (epochMs: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, epochMs - Date.now())));
  await sleepUntil(from);
  const before = await readCpu([serverPid, ...pids]);
  const own0 = process.cpuUsage();
  const t0 = Date.now();
  await sleepUntil(until);
  const after = await readCpu([serverPid, ...pids]);
  const own = process.cpuUsage(own0);
  const seconds = (Date.now() - t0) / 1000;
  const { cores, stolen } = cpuBetween(before, after, seconds);
  return {
    server: cores[0],
    others: cores.slice(1),
    generator: (own.user + own.system) / 1e6 / seconds,
    stolen,
  };
}

function merge(spec: LoadSpec, workers: number, measureFrom: number, results: LoadWorkerResult[], cpu: CpuUse): LoadResult {
  const latency = new Histogram();
  let ops = 0;
  let errors = 0;
  let contended = 0;
  let failedConnections = 0;
  let abandoned = 0;
  let worstAt = 0;
  let worstUs = -1;
  const timelineOps: number[] = [];
  const timelineWorstUs: number[] = [];
  for (const r of results) {
    latency.merge(r.latencyUs);
    ops += r.ops;
    errors += r.errors;
    contended += r.contended;
    failedConnections += r.failedConnections;
    abandoned += r.abandoned;
    if (r.latencyUs.max > worstUs) {
      worstUs = r.latencyUs.max;
      worstAt = r.worstAt;
    }
    r.timelineOps.forEach((v, i) => (timelineOps[i] = (timelineOps[i] ?? 0) + v));
    r.timelineWorstUs.forEach((v, i) => (timelineWorstUs[i] = Math.max(timelineWorstUs[i] ?? 0, v)));
  }
  const ms = (us: number): number => us / 1000;
  return {
    connections: spec.connections,
    depth: spec.depth,
    workers,
    durationMs: spec.durationMs,
    ops,
    opsPerSecond: ops / (spec.durationMs / 1000),
    errors,
    contended,
    failedConnections,
    abandoned,
    latencyMs: {
      p50: ms(latency.percentile(50)),
      p99: ms(latency.percentile(99)),
      p999: ms(latency.percentile(99.9)),
      max: ms(latency.max),
      mean: ms(latency.mean),
    },
    latencyUs: latency.toData(),
    worstAt,
    connectionOps: {
      min: Math.min(...results.map((r) => r.minConnectionOps)),
      max: Math.max(...results.map((r) => r.maxConnectionOps)),
    },
    serverCpuCores: cpu.server,
    ...(spec.cpuPids !== undefined ? { pidCpuCores: cpu.others } : {}),
    generatorCpuCores: cpu.generator,
    ...(cpu.stolen !== undefined ? { hostStolenShare: cpu.stolen } : {}),
    measureFrom,
    ...(spec.timelineSlotMs
      ? { timeline: { slotMs: spec.timelineSlotMs, ops: Array.from(timelineOps, (v) => v ?? 0), worstUs: Array.from(timelineWorstUs, (v) => v ?? 0) } }
      : {}),
  };
}
