/**
 * One load-generator thread: opens its share of the connections, then runs closed-loop request+
 * release cycles on each until the window ends. Every byte it sends was encoded before the clock
 * started; replies are counted by their length, never decoded. Runs as a worker_threads Worker.
 */
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import { Histogram } from '../Histogram.js';
import { buildCycleRing, RandomCycles, type CycleRing } from './cycles.js';
import { framingOf, type ReplyFraming } from './framing.js';
import type { GoMessage, LoadWorkerData, LoadWorkerResult, WorkerToParent } from './messages.js';

const INCOMPLETE = -1;

class Window {
  ops = 0;
  errors = 0;
  contended = 0;
  readonly latency = new Histogram();
  worstUs = -1;
  worstAt = 0;
  readonly timelineOps: number[] = [];
  readonly timelineWorstUs: number[] = [];

  constructor(
    /** Window bounds on this thread's performance.now() scale. */
    readonly from: number,
    readonly until: number,
    readonly slotMs: number,
  ) {}

  reply(latencyMs: number, now: number): boolean {
    if (now < this.from || now >= this.until) return false;
    const us = latencyMs * 1000;
    this.ops++;
    this.latency.record(us);
    if (us > this.worstUs) {
      this.worstUs = us;
      this.worstAt = now;
    }
    if (this.slotMs > 0) {
      const slot = Math.floor((now - this.from) / this.slotMs);
      this.timelineOps[slot] = (this.timelineOps[slot] ?? 0) + 1;
      if (us > (this.timelineWorstUs[slot] ?? 0)) this.timelineWorstUs[slot] = Math.round(us);
    }
    return true;
  }
}

/** Where a connection's batches come from: a pre-encoded ring, or random keys made as it goes. */
interface BatchSource {
  /** The next batch to send; its expected reply kinds are then in `kinds`. */
  next(): Buffer;
  readonly kinds: Uint8Array;
}

class RingSource implements BatchSource {
  private i = 0;
  kinds: Uint8Array = new Uint8Array(0);

  constructor(private readonly ring: CycleRing) {}

  next(): Buffer {
    const i = this.i;
    this.i = i + 1 === this.ring.batches.length ? 0 : i + 1;
    this.kinds = this.ring.kinds[i]!;
    return this.ring.batches[i]!;
  }
}

class LoadConnection {
  private pending = 0;
  private kinds: Uint8Array = new Uint8Array(0);
  private sentAt = 0;
  private carry: Buffer | undefined;
  private window: Window | undefined;
  ops = 0;
  finished = false;
  failed = false;

  constructor(
    readonly socket: Socket,
    private readonly source: BatchSource,
    private readonly framing: ReplyFraming,
    /** Random keys: a reply that is not a successful cycle's means another connection had the key. */
    private readonly sharedKeys: boolean,
    private readonly onFinished: () => void,
  ) {}

  get outstanding(): boolean {
    return this.pending > 0;
  }

  start(window: Window): void {
    this.window = window;
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.send(performance.now());
  }

  fail(): void {
    if (this.finished) return;
    this.failed = true;
    this.finish();
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.onFinished();
  }

  private send(now: number): void {
    if (now >= this.window!.until) {
      this.finish();
      return;
    }
    const batch = this.source.next();
    this.kinds = this.source.kinds;
    this.pending = this.kinds.length;
    this.sentAt = now;
    this.socket.write(batch);
  }

  private onData(chunk: Buffer): void {
    if (this.finished) return;
    let buffer = chunk;
    if (this.carry !== undefined) {
      buffer = Buffer.concat([this.carry, chunk]);
      this.carry = undefined;
    }
    const now = performance.now();
    const window = this.window!;
    const kinds = this.kinds;
    const framing = this.framing;
    let offset = 0;
    while (this.pending > 0) {
      const kind = kinds[kinds.length - this.pending]!;
      const length = framing.length(kind, buffer, offset, buffer.length);
      if (length === INCOMPLETE) break;
      if (!framing.ok(kind, buffer, offset)) {
        if (this.sharedKeys) window.contended++;
        else window.errors++;
      }
      offset += length;
      this.pending--;
      if (window.reply(now - this.sentAt, now)) this.ops++;
    }
    if (offset < buffer.length) {
      if (this.pending === 0) {
        // Bytes no request asked for: the target is not speaking the protocol we think.
        window.errors++;
        this.fail();
        return;
      }
      this.carry = Buffer.from(buffer.subarray(offset));
    }
    if (this.pending === 0) this.send(now);
  }
}

function post(message: WorkerToParent): void {
  parentPort!.postMessage(message);
}

/** Connects one socket and waits for the greeting; rejects on refusal, error or timeout. */
function open(data: LoadWorkerData, n: number, framing: ReplyFraming): Promise<Socket> {
  const endpoint = data.endpoints[n % data.endpoints.length]!;
  return new Promise((resolve, reject) => {
    const socket = connect({ host: endpoint.host, port: endpoint.port, noDelay: true });
    const timer = setTimeout(() => fail(new Error(`connect to ${endpoint.host}:${endpoint.port} timed out`)), data.connectTimeoutMs);
    let greeting = Buffer.alloc(0);
    const fail = (error: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    };
    const done = (): void => {
      clearTimeout(timer);
      socket.off('data', onGreeting);
      socket.off('error', fail);
      socket.on('error', () => {});
      resolve(socket);
    };
    const onGreeting = (chunk: Buffer): void => {
      greeting = Buffer.concat([greeting, chunk]);
      if (greeting.length < framing.greetingLength) return;
      if (greeting.length > framing.greetingLength || !framing.greetingOk(greeting)) {
        fail(new Error(`refused by ${endpoint.host}:${endpoint.port} (greeting ${greeting.toString('hex')})`));
        return;
      }
      done();
    };
    socket.once('error', fail);
    socket.on('data', onGreeting);
    socket.once('connect', () => {
      if (framing.greetingLength === 0) done();
    });
  });
}

async function main(): Promise<void> {
  const data = workerData as LoadWorkerData;
  const framing = framingOf(data.protocol);
  const sockets: Socket[] = [];
  try {
    for (let first = 0; first < data.connections; first += data.connectConcurrency) {
      const wave = [];
      for (let n = first; n < Math.min(data.connections, first + data.connectConcurrency); n++) wave.push(open(data, n, framing));
      sockets.push(...(await Promise.all(wave)));
    }
  } catch (error) {
    for (const socket of sockets) socket.destroy();
    post({ type: 'failed', message: (error as Error).message });
    return;
  }

  let unfinished = sockets.length;
  let reported = false;
  const connections = sockets.map(
    (socket, n) =>
      new LoadConnection(
        socket,
        data.keySpace === undefined
          ? new RingSource(buildCycleRing(data.protocol, `bench:${data.runTag}:w${data.workerId}:c${n}`, `w${data.workerId}c${n}`, data.depth))
          : new RandomCycles(
              data.protocol,
              `${data.runTag}:`,
              `client${(data.firstConnection ?? 0) + n}`,
              data.keySpace,
              data.depth,
              (data.seed ?? 1) * 1_000_003 + (data.firstConnection ?? 0) + n,
            ),
        framing,
        data.keySpace !== undefined,
        () => {
          unfinished--;
          if (unfinished === 0) report();
        },
      ),
  );
  for (const c of connections) c.socket.on('close', () => c.fail());

  let window: Window | undefined;
  let hardStop: NodeJS.Timeout | undefined;
  const report = (): void => {
    if (reported || window === undefined) return;
    reported = true;
    clearTimeout(hardStop);
    for (const c of connections) c.socket.destroy();
    const ops = connections.map((c) => c.ops);
    const result: LoadWorkerResult = {
      workerId: data.workerId,
      ops: window.ops,
      errors: window.errors,
      contended: window.contended,
      failedConnections: connections.filter((c) => c.failed).length,
      abandoned: connections.filter((c) => c.outstanding && !c.failed).length,
      latencyUs: window.latency.toData(),
      worstAt: performance.timeOrigin + window.worstAt,
      minConnectionOps: ops.length === 0 ? 0 : Math.min(...ops),
      maxConnectionOps: ops.length === 0 ? 0 : Math.max(...ops),
      timelineOps: Array.from(window.timelineOps, (v) => v ?? 0),
      timelineWorstUs: Array.from(window.timelineWorstUs, (v) => v ?? 0),
    };
    post({ type: 'done', result });
  };

  parentPort!.once('message', (go: GoMessage) => {
    const local = (epochMs: number): number => epochMs - performance.timeOrigin;
    window = new Window(local(go.measureFrom), local(go.measureUntil), data.timelineSlotMs);
    hardStop = setTimeout(report, Math.max(0, local(go.stopAt) - performance.now()));
    for (const c of connections) c.start(window);
    if (connections.length === 0) report();
  });
  post({ type: 'ready' });
}

void main();
