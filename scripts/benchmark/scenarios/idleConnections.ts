import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Command } from '../../../src/protocol/constants.js';
import { BenchClient } from '../BenchClient.js';
import type { BenchConfig } from '../config.js';
import { Histogram } from '../Histogram.js';
import type { Endpoint } from '../load/messages.js';
import { rssBytes } from '../processes.js';
import type { Target } from '../targets/Target.js';

const CONNECT_WAVE = 500;
const CONNECT_TIMEOUT_MS = 10_000;
const SETTLE_MS = 1_000;
/** Stats requests timed on one more connection while the idle ones are open. */
const PROBE_CALLS = 2_000;

export interface IdleResult {
  readonly connections: number;
  readonly opened: number;
  readonly rssBytes: { readonly before?: number; readonly idle?: number };
  readonly bytesPerConnection: number | undefined;
  /** A busy client's reply times while the idle ones are open. */
  readonly probeMs: { readonly p50: number; readonly p99: number; readonly max: number };
}

/** Opens `idleConnections` connections that never send a byte, then reads the server's RSS. */
export async function runIdleConnections(target: Target, config: BenchConfig, log: (line: string) => void): Promise<IdleResult> {
  const count = config.idleConnections;
  const running = await target.start({ maxConnections: count + 100 });
  const sockets: Socket[] = [];
  try {
    const pid = running.pids[0]!;
    const before = await rssBytes(pid);
    for (let first = 0; first < count; first += CONNECT_WAVE) {
      const wave: Array<Promise<Socket>> = [];
      for (let n = first; n < Math.min(count, first + CONNECT_WAVE); n++) wave.push(openIdle(running.endpoints[n % running.endpoints.length]!));
      sockets.push(...(await Promise.all(wave)));
    }
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const idle = await rssBytes(pid);
    const probe = await BenchClient.connect(running.endpoints[0]!);
    const timing = new Histogram();
    try {
      for (let i = 0; i < PROBE_CALLS; i++) {
        const t0 = performance.now();
        await probe.call([{ command: Command.Stats }]);
        timing.record((performance.now() - t0) * 1000);
      }
    } finally {
      probe.close();
    }
    const result: IdleResult = {
      connections: count,
      opened: sockets.length,
      rssBytes: { before, idle },
      bytesPerConnection: before !== undefined && idle !== undefined ? (idle - before) / sockets.length : undefined,
      probeMs: { p50: timing.percentile(50) / 1000, p99: timing.percentile(99) / 1000, max: timing.max / 1000 },
    };
    log(`${sockets.length} idle connections: RSS ${before} -> ${idle} bytes`);
    return result;
  } finally {
    for (const s of sockets) s.destroy();
    await running.stop();
  }
}

/** One connection that is greeted and then says nothing. */
function openIdle(endpoint: Endpoint): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: endpoint.host, port: endpoint.port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('idle connection: no greeting in time'));
    }, CONNECT_TIMEOUT_MS);
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.once('data', (chunk: Buffer) => {
      clearTimeout(timer);
      socket.on('error', () => {});
      if (chunk[0] === 1) resolve(socket);
      else reject(new Error('idle connection refused'));
    });
  });
}
