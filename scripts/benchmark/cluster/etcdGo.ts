/**
 * etcd driven by etcd's own Go client: the program in scripts/benchmark/etcdgo/ (main.go), built
 * once per run in GOPATH mode from Debian's packages (golang-go, golang-etcd-server-dev: the etcd 3.4
 * sources and every library they need under /usr/share/gocode), with no module download. The binary
 * and Go's build cache live under the OS temp dir, the binary keyed on a hash of the source, the Go
 * version and the etcd sources' version, so a second run reuses it.
 */
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, mkdir, readdir, readFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../../src/packageRoot.js';
import { cpuBetween, readCpu, trackChild, which, type CpuReading } from '../processes.js';

const run = promisify(execFile);

/** The Go program's folder in the repository (the compiled bench runs from dist/, the source stays here). */
export const ETCD_GO_SOURCE = join(PACKAGE_ROOT, 'scripts', 'benchmark', 'etcdgo');
/** Where Debian's golang-etcd-server-dev puts etcd's sources and the libraries they import. */
const DEBIAN_GOCODE = '/usr/share/gocode';
const ETCD_CLIENT_PACKAGE = join(DEBIAN_GOCODE, 'src', 'go.etcd.io', 'etcd', 'clientv3', 'concurrency');
const ETCD_VERSION_FILE = join(DEBIAN_GOCODE, 'src', 'go.etcd.io', 'etcd', 'version', 'version.go');
const CACHE_DIR = join(tmpdir(), 'lockserver-bench', 'etcdgo');
export const ETCD_GO_MISSING = 'go or golang-etcd-server-dev missing (apt-get install golang-go golang-etcd-server-dev)';
const BUILD_TIMEOUT_MS = 600_000;
/** Beyond warmup + window: connecting, granting the sessions' leases, the last cycles, the clean-up. */
const RUN_SLACK_MS = 60_000;

export type EtcdGoMode = 'lock' | 'put' | 'serial';

/** What the program prints (one JSON object), plus what the bench measured around it. */
export interface EtcdGoResult {
  readonly mode: EtcdGoMode;
  /** Lockers (lock) or writers (put); 1 for serial. */
  readonly concurrency: number;
  /** Size of each Put's value (put, serial). */
  readonly valueBytes?: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  /** Connecting and granting each locker's lease, before the warmup. */
  readonly setupMs: number;
  /** Lock+unlock cycles (lock) or Puts (put, serial) that ended in the window. */
  readonly cycles: number;
  readonly cyclesPerSecond: number;
  /** Two per lock cycle (acquire and release, as our load generator counts request and release), one per Put. */
  readonly opsPerSecond: number;
  /** Of one whole lock+unlock cycle (lock), of one Put (put, serial). */
  readonly latencyMs: { readonly p50: number; readonly p99: number; readonly p999: number; readonly mean: number; readonly max: number };
  readonly errors: number;
  readonly lastError?: string;
  /** Share of one core the Go program used in the window. */
  readonly clientCpuCores: number;
  readonly goMaxProcs: number;
  /** Share of one core each etcd member used in the window (read when the program says it opens and closes). */
  readonly etcdCpuCores: ReadonlyArray<number | undefined>;
  /** Share of the machine's CPU time the hypervisor took in the window (see LoadResult). */
  readonly hostStolenShare?: number;
}

export type EtcdGoBuild =
  { readonly binary: string; readonly cached: boolean; readonly buildMs: number; readonly goVersion: string } | { readonly skipped: string };

let building: Promise<EtcdGoBuild> | undefined;

/** The program's binary, built at most once per run (and reused across runs while nothing changed). */
export function buildEtcdGo(log: (line: string) => void): Promise<EtcdGoBuild> {
  building ??= build(log);
  return building;
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

async function build(log: (line: string) => void): Promise<EtcdGoBuild> {
  const go = await which('go');
  if (go === undefined || !(await exists(ETCD_CLIENT_PACKAGE))) return { skipped: ETCD_GO_MISSING };
  const env = {
    ...process.env,
    // GOPATH mode: imports resolve under /usr/share/gocode/src; nothing is fetched from anywhere.
    GO111MODULE: 'off',
    GOPATH: `${join(CACHE_DIR, 'gopath')}:${DEBIAN_GOCODE}`,
    GOCACHE: join(CACHE_DIR, 'gocache'),
    GOPROXY: 'off',
    GOFLAGS: '',
    // A static binary with Go's own resolver: no C compiler needed.
    CGO_ENABLED: '0',
  };
  let goVersion: string;
  try {
    goVersion = (await run(go, ['version'], { env })).stdout.trim();
  } catch (error) {
    return { skipped: `${ETCD_GO_MISSING}: \`go version\` failed: ${(error as Error).message.split('\n')[0]}` };
  }
  const hash = createHash('sha256');
  // Every Go file of the program (main.go, handoff.go), in name order.
  for (const file of (await readdir(ETCD_GO_SOURCE)).filter((f) => f.endsWith('.go')).sort()) {
    hash.update(file);
    hash.update(await readFile(join(ETCD_GO_SOURCE, file)));
  }
  hash.update(goVersion);
  hash.update(await readFile(ETCD_VERSION_FILE).catch(() => ''));
  const binary = join(CACHE_DIR, `etcdgo-${hash.digest('hex').slice(0, 16)}`);
  if (await exists(binary)) return { binary, cached: true, buildMs: 0, goVersion };
  log(`etcd Go client: building ${ETCD_GO_SOURCE} (${goVersion}, GOPATH mode from ${DEBIAN_GOCODE}) into ${binary}`);
  await mkdir(join(CACHE_DIR, 'gopath'), { recursive: true });
  const partial = `${binary}.${process.pid}.partial`;
  const t0 = performance.now();
  try {
    await run(go, ['build', '-o', partial, '.'], { cwd: ETCD_GO_SOURCE, env, timeout: BUILD_TIMEOUT_MS, maxBuffer: 16 * 2 ** 20 });
  } catch (error) {
    const e = error as Error & { stderr?: string };
    return { skipped: `the Go program did not build: ${(e.stderr ?? e.message).trim().split('\n').slice(0, 5).join(' / ')}` };
  }
  await rename(partial, binary);
  return { binary, cached: false, buildMs: performance.now() - t0, goVersion };
}

/**
 * One run of the program against the given etcd members. The members' CPU is read when the
 * program says its window opens and closes; it is killed if it outlives its window by a minute.
 */
export function runEtcdGo(spec: {
  readonly binary: string;
  readonly endpoints: readonly string[];
  readonly mode: EtcdGoMode;
  readonly concurrency: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly etcdPids: ReadonlyArray<number | undefined>;
}): Promise<EtcdGoResult> {
  // prettier-ignore
  const args = [
    '-endpoints', spec.endpoints.join(','),
    '-mode', spec.mode,
    '-concurrency', String(spec.concurrency),
    '-warmup', `${spec.warmupMs}ms`,
    '-duration', `${spec.durationMs}ms`,
  ];
  const child = spawn(spec.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  // Killed with the bench's other processes on Ctrl-C or at its exit.
  trackChild(child);
  type Reading = { at: number; cpu: CpuReading };
  const read = async (at: number): Promise<Reading> => ({ at, cpu: await readCpu(spec.etcdPids) });
  let stdout = '';
  const stderr: string[] = [];
  let opened: Promise<Reading> | undefined;
  let closed: Promise<Reading> | undefined;
  let partial = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => {
    const lines = (partial + text).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      const at = performance.now();
      if (line === 'measuring') opened ??= read(at);
      else if (line === 'measured') closed ??= read(at);
      else if (line !== '') stderr.push(line);
    }
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), spec.warmupMs + spec.durationMs + RUN_SLACK_MS);
  return new Promise<EtcdGoResult>((resolve, reject) => {
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      void (async () => {
        if (code !== 0) throw new Error(`etcdgo -mode ${spec.mode} exited with ${code ?? signal}: ${stderr.slice(-5).join(' / ') || 'no output'}`);
        const printed = JSON.parse(stdout) as Omit<EtcdGoResult, 'etcdCpuCores' | 'hostStolenShare'>;
        const a = await opened;
        const b = await closed;
        const window = a === undefined || b === undefined ? undefined : cpuBetween(a.cpu, b.cpu, (b.at - a.at) / 1000);
        const etcdCpuCores = window?.cores ?? spec.etcdPids.map(() => undefined);
        return { ...printed, etcdCpuCores, ...(window?.stolen !== undefined ? { hostStolenShare: window.stolen } : {}) };
      })().then(resolve, reject);
    });
  });
}

/** One try of the program's handoff mode; ms from right before the owner's Unlock was sent. */
export interface EtcdGoHandoffTry {
  readonly delayMs: number;
  readonly queuedMs: number;
  /** Until the waiter's Lock returned. */
  readonly toldMs: number;
  /** Until the command the waiter then ran (sh -c 'date +%s%N') read the clock. */
  readonly ranMs: number;
  /** Until the owner's Unlock returned. */
  readonly unlockMs: number;
  readonly error?: string;
}

export interface EtcdGoHandoffResult {
  readonly ownerEndpoint: string;
  readonly waiterEndpoint: string;
  readonly sessionTtl: number;
  readonly setupMs: number;
  readonly tries: readonly EtcdGoHandoffTry[];
}

/** Beyond the delays: connecting, the sessions, each try's lock, grant and command, the clean-up. */
const HANDOFF_SLACK_MS = 30_000;

/**
 * The program's handoff mode: one try per delay, the owner's client on endpoints[0] and the
 * waiter's on endpoints[1] (endpoints[0] when alone). Killed if it outlives its delays by 30 s.
 */
export async function runEtcdGoHandoff(spec: {
  readonly binary: string;
  readonly endpoints: readonly string[];
  readonly delaysMs: readonly number[];
  readonly sessionTtlSeconds: number;
}): Promise<EtcdGoHandoffResult> {
  // prettier-ignore
  const args = [
    '-mode', 'handoff',
    '-endpoints', spec.endpoints.join(','),
    '-ttl', String(spec.sessionTtlSeconds),
    '-delays', spec.delaysMs.map((d) => `${Math.round(d)}ms`).join(','),
  ];
  const timeout = spec.delaysMs.reduce((sum, d) => sum + d, 0) + HANDOFF_SLACK_MS;
  const child = trackChild(spawn(spec.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr!.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (c, s) => resolve([c, s]));
  }).finally(() => clearTimeout(timer));
  if (code !== 0) throw new Error(`etcdgo -mode handoff exited with ${code ?? signal}: ${stderr.trim().split('\n').slice(-3).join(' / ') || 'no output'}`);
  return JSON.parse(stdout) as EtcdGoHandoffResult;
}
