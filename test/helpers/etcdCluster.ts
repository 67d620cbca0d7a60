import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { createWriteStream, openSync, closeSync, statSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { ExecutionContext, Implementation, TestFn } from 'ava';
import { Etcd3 } from 'etcd3';
import { decodeValue } from '../../src/cluster/LogCodec.js';
import { bounded } from './bounded.js';
import type { RawClient } from './rawClient.js';
import { LOOPBACK_HOSTS, ServerProcess, serverArgs, serverFiles, spawnLockserver } from './serverProcess.js';

/** Longest a member, or the whole cluster, may take to report healthy. */
export const ETCD_HEALTHY_MS = 30_000;
/** Longest a lockserver node may take to log `event=ready` once etcd is healthy. */
export const NODE_READY_MS = 30_000;
const POLL_MS = 100;

/** Where etcd-server comes from, for the skip note and the CI failure. */
const INSTALL_HINT = 'install it with `apt-get install -y etcd-server` (Debian/Ubuntu) and run `npm test` again';

/** Processes started by these helpers; killed if the worker ends without running teardowns. */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

// Whether etcd can run here

let etcdFound: boolean | undefined;

export function etcdAvailable(): boolean {
  etcdFound ??= spawnSync('etcd', ['--version'], { stdio: 'ignore' }).status === 0;
  return etcdFound;
}

type EtcdImplementation = Implementation<[]>;

/** `test`, or `test.serial`, for tests that need a real etcd. */
export interface EtcdTestFn {
  (title: string, implementation: EtcdImplementation): void;
  serial(title: string, implementation: EtcdImplementation): void;
}

/**
 * Wraps ava's `test` for tests that start real etcd members. With `etcd` on the PATH they run;
 * without it they are skipped with a plain note saying how to install it (printed once per
 * `npm test`), except under CI (CI=true), where each of them fails instead: CI must not pass
 * with the cluster untested.
 */
export function needsEtcd(test: TestFn): EtcdTestFn {
  if (etcdAvailable()) {
    const run = ((title, implementation) => test(title, implementation)) as EtcdTestFn;
    run.serial = (title, implementation) => test.serial(title, implementation);
    return run;
  }
  if (process.env.CI === 'true') {
    const fail = (title: string): void => test(title, (t) => t.fail(`etcd is not on the PATH and CI=true: the cluster tests cannot run; ${INSTALL_HINT}`));
    const run = ((title: string) => fail(title)) as unknown as EtcdTestFn;
    run.serial = (title) => fail(title);
    return run;
  }
  printSkipNoteOnce();
  const run = ((title, implementation) => test.skip(title, implementation)) as EtcdTestFn;
  run.serial = (title, implementation) => test.serial.skip(title, implementation);
  return run;
}

/**
 * ava runs test files in worker threads of one process: a marker file named after that process
 * lets the first file print the note and the others stay quiet.
 */
function printSkipNoteOnce(): void {
  const marker = join(tmpdir(), `lockserver-etcd-skip-note-${process.pid}`);
  try {
    if (Date.now() - statSync(marker).mtimeMs < 3_600_000) return; // an earlier file printed it
  } catch {
    // no marker yet
  }
  try {
    closeSync(openSync(marker, 'w'));
  } catch {
    // the note is printed anyway
  }
  console.log(`\n  Cluster tests SKIPPED: \`etcd\` is not on the PATH. To run them, ${INSTALL_HINT}.\n`);
}

// Ports

/** Below this, ports belong to services (etcd's 2379, ours from 7734, metrics on 9464, …). */
const LOWEST_TEST_PORT = 10_000;
/** Tries per port before giving up: the range holds thousands of ports and few are taken. */
const PORT_TRIES = 200;

/**
 * Where the kernel takes the source ports of outgoing connections (Linux's
 * `ip_local_port_range`; its default first port where the file cannot be read).
 */
async function ephemeralPortsFrom(): Promise<number> {
  try {
    const first = Number((await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'latin1')).trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > LOWEST_TEST_PORT + 1_000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/**
 * `count` distinct loopback ports that were free when chosen, for processes that bind them
 * later, some of them more than once (an etcd member restarted on its ports). They come from
 * below the ephemeral range: a port the kernel handed out for `listen(0)` and that was then
 * closed is an ephemeral port, which any of the suite's many outgoing connections could take as
 * its source port before etcd bound it ("bind: address already in use", seen in CI). No
 * connect() takes a port outside that range; only another listener that binds it by number
 * could, and these are picked at random among about 20,000.
 */
export async function freePorts(count: number): Promise<number[]> {
  const below = await ephemeralPortsFrom();
  const held: Server[] = [];
  try {
    for (let i = 0; i < count; i++) held.push(await listenOnFreePort(below));
    return held.map((s) => (s.address() as AddressInfo).port);
  } finally {
    await Promise.all(held.map((s) => new Promise((resolve) => s.close(resolve))));
  }
}

/** A server listening on a port picked at random in [LOWEST_TEST_PORT, below) (bounded tries). */
async function listenOnFreePort(below: number): Promise<Server> {
  for (let attempt = 0; attempt < PORT_TRIES; attempt++) {
    const server = createServer();
    const listening = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(randomInt(LOWEST_TEST_PORT, below), '127.0.0.1', () => resolve(true));
    });
    if (listening) return server;
  }
  throw new Error(`no free loopback port in ${LOWEST_TEST_PORT}..${below - 1} after ${PORT_TRIES} tries`);
}

// etcd members

export interface EtcdMember {
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  readonly dataDir: string;
  readonly logFile: string;
  readonly clientUrl: string;
  process: ChildProcess | undefined;
  paused: boolean;
}

export interface EtcdClusterOptions {
  /** Keep etcd's fsync (the full-restart durability test); --unsafe-no-fsync otherwise. */
  readonly fsync?: boolean;
  readonly members?: number;
  /** Further etcd flags for every member (`--quota-backend-bytes`, …). */
  readonly extraArgs?: readonly string[];
}

export interface MemberStatus {
  readonly header: { readonly member_id: string };
  readonly leader: string;
}

/**
 * A real etcd cluster on loopback for one test: free ports, one data dir per member under a
 * temp dir (removed at teardown), a unique cluster token. Members can be killed, paused,
 * resumed and restarted; every member left is killed when the test ends, pass or fail. Each
 * member's log is kept in its file and its tail is attached to a failing test.
 */
export class EtcdCluster {
  private constructor(
    private readonly t: ExecutionContext,
    readonly dir: string,
    readonly members: readonly EtcdMember[],
    private readonly args: (member: EtcdMember) => string[],
  ) {}

  /** Starts the members and waits until all are healthy. */
  static async start(t: ExecutionContext, options: EtcdClusterOptions = {}): Promise<EtcdCluster> {
    const cluster = await EtcdCluster.create(t, options);
    await cluster.launch();
    return cluster;
  }

  /** Chooses ports and directories but starts no member yet (see launch()). */
  static async create(t: ExecutionContext, options: EtcdClusterOptions = {}): Promise<EtcdCluster> {
    const count = options.members ?? 3;
    const dir = await mkdtemp(join(tmpdir(), 'lockserver-etcd-'));
    const ports = await freePorts(count * 2);
    const members: EtcdMember[] = Array.from({ length: count }, (_, i) => {
      const clientPort = ports[2 * i]!;
      return {
        name: `m${i}`,
        clientPort,
        peerPort: ports[2 * i + 1]!,
        dataDir: join(dir, `m${i}.etcd`),
        logFile: join(dir, `m${i}.log`),
        clientUrl: `http://127.0.0.1:${clientPort}`,
        process: undefined,
        paused: false,
      };
    });
    const token = `lockserver-test-${randomBytes(6).toString('hex')}`;
    const initialCluster = members.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(',');
    // prettier-ignore
    const args = (m: EtcdMember): string[] => [
      '--name', m.name,
      '--data-dir', m.dataDir,
      '--listen-client-urls', m.clientUrl,
      '--advertise-client-urls', m.clientUrl,
      '--listen-peer-urls', `http://127.0.0.1:${m.peerPort}`,
      '--initial-advertise-peer-urls', `http://127.0.0.1:${m.peerPort}`,
      '--initial-cluster', initialCluster,
      '--initial-cluster-token', token,
      '--initial-cluster-state', 'new',
      // Looser than the defaults (100/1000 ms): the test machine is small and shared.
      '--heartbeat-interval', '200',
      '--election-timeout', '2000',
      '--logger', 'zap',
      // info, not warn: a member waiting for a leader logs nothing at warn, and a failing test
      // shows each member's tail (elections, terms, who it voted for).
      '--log-level', 'info',
      ...(options.fsync === true ? [] : ['--unsafe-no-fsync']),
      ...(options.extraArgs ?? []),
    ];
    const cluster = new EtcdCluster(t, dir, members, args);
    t.teardown(() => cluster.destroy());
    return cluster;
  }

  /** Starts every member that is not running and waits until all are healthy. */
  async launch(): Promise<void> {
    for (const member of this.members) if (member.process === undefined) await this.spawn(member);
    await this.waitHealthy();
  }

  /** Every member's client URL, comma-separated, as `--etcd` takes them. */
  get endpoints(): string {
    return this.members.map((m) => m.clientUrl).join(',');
  }

  /** Every member's client URL, as a list (EtcdLog's `endpoints`). */
  get endpointList(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  /** The member listening on `url`. */
  memberAt(url: string): EtcdMember {
    const member = this.members.find((m) => m.clientUrl === url);
    if (member === undefined) throw new Error(`no etcd member at ${url}`);
    return member;
  }

  /** How many watchers the member serves now (its `etcd_debugging_mvcc_watcher_total` gauge); undefined if it does not answer. */
  async watchersOn(member: EtcdMember): Promise<number | undefined> {
    try {
      const response = await fetch(`${member.clientUrl}/metrics`, { signal: AbortSignal.timeout(1_000) });
      const match = /^etcd_debugging_mvcc_watcher_total (\S+)$/m.exec(await response.text());
      return match === null ? undefined : Number(match[1]);
    } catch {
      return undefined;
    }
  }

  private async spawn(member: EtcdMember): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const log = createWriteStream(member.logFile, { flags: 'a' });
    await new Promise((resolve) => log.once('open', resolve));
    const child = track(spawn('etcd', this.args(member), { stdio: ['ignore', log, log] }));
    child.once('exit', () => log.end());
    member.process = child;
    member.paused = false;
  }

  /** Resolves once every running member (or those given) reports healthy (bounded). */
  async waitHealthy(which: readonly EtcdMember[] = this.members.filter((m) => m.process !== undefined), ms = ETCD_HEALTHY_MS): Promise<void> {
    const deadline = Date.now() + ms;
    for (const member of which) {
      for (;;) {
        if (await healthy(member)) break;
        if (member.process === undefined) throw new Error(`etcd member ${member.name} is not running`);
        if (Date.now() >= deadline) {
          // etcd serves no client request (not even /health) until its member has a leader and has
          // published itself, and logs nothing at warn while it waits: the report says what each
          // member's process is doing; the teardown logs every member's tail (raft's elections included).
          const report = await Promise.all(this.members.map((m) => this.describe(m)));
          throw new Error(`etcd member ${member.name} not healthy within ${ms} ms\n${report.join('\n')}`);
        }
        await delay(POLL_MS);
      }
    }
  }

  /** The member that leads the Raft group now (asked of the running, unpaused members; bounded). */
  async leader(ms = ETCD_HEALTHY_MS): Promise<EtcdMember> {
    const deadline = Date.now() + ms;
    for (;;) {
      const live = this.members.filter((m) => m.process !== undefined && !m.paused);
      const statuses = await Promise.all(live.map(async (m) => ({ member: m, status: await memberStatus(m.clientUrl) })));
      const ids = new Map<string, EtcdMember>();
      for (const { member, status: s } of statuses) if (s !== undefined) ids.set(s.header.member_id, member);
      for (const { status: s } of statuses) {
        const leader = s === undefined || s.leader === '0' ? undefined : ids.get(s.leader);
        if (leader !== undefined) return leader;
      }
      if (Date.now() >= deadline) throw new Error(`no etcd leader among the running members within ${ms} ms`);
      await delay(POLL_MS);
    }
  }

  /** The running members other than `member`. */
  others(member: EtcdMember): EtcdMember[] {
    return this.members.filter((m) => m !== member && m.process !== undefined);
  }

  /** kill -9, awaited. */
  async kill(member: EtcdMember): Promise<void> {
    const child = member.process;
    if (child === undefined) return;
    member.process = undefined;
    member.paused = false;
    await killAndWait(child, 'SIGKILL');
  }

  /** SIGTERM, awaited (bounded): etcd stops cleanly. */
  async stop(member: EtcdMember): Promise<void> {
    const child = member.process;
    if (child === undefined) return;
    if (member.paused) this.resume(member);
    member.process = undefined;
    await killAndWait(child, 'SIGTERM');
  }

  pause(member: EtcdMember): void {
    member.process?.kill('SIGSTOP');
    member.paused = true;
  }

  resume(member: EtcdMember): void {
    member.process?.kill('SIGCONT');
    member.paused = false;
  }

  /** Starts a stopped or killed member again on its data dir, and waits until it is healthy. */
  async restart(member: EtcdMember, wait = true): Promise<void> {
    if (member.process !== undefined) throw new Error(`etcd member ${member.name} is still running`);
    await this.spawn(member);
    if (wait) await this.waitHealthy([member]);
  }

  /** One line on a member's process: exited (how), or running with its state as /proc says (T: stopped). */
  private async describe(member: EtcdMember): Promise<string> {
    const child = member.process;
    const ports = `ports ${member.clientPort}/${member.peerPort}`;
    if (child === undefined) return `etcd ${member.name}: not started, ${ports}`;
    if (child.exitCode !== null || child.signalCode !== null)
      return `etcd ${member.name}: exited (code ${child.exitCode}, signal ${child.signalCode}), ${ports}`;
    const stat = await readFile(`/proc/${child.pid}/stat`, 'latin1').catch(() => '');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? '?';
    return `etcd ${member.name}: running as pid ${child.pid}, process state ${state}${member.paused ? ' (paused by the test)' : ''}, ${ports}`;
  }

  async logTail(member: EtcdMember, lines = 25): Promise<string> {
    const text = await readFile(member.logFile, 'utf8').catch(() => '');
    return `--- etcd ${member.name} log (last ${lines} lines) ---\n${text
      .split('\n')
      .slice(-lines - 1)
      .join('\n')}`;
  }

  private async destroy(): Promise<void> {
    const running = this.members.filter((m) => m.process !== undefined);
    await Promise.all(running.map((m) => this.kill(m)));
    if (!this.t.passed) for (const m of this.members) this.t.log(await this.logTail(m));
    await rm(this.dir, { recursive: true, force: true });
  }
}

async function killAndWait(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  if (signal === 'SIGTERM') child.kill('SIGCONT');
  await bounded(exited, 10_000, `etcd pid ${child.pid} to exit on ${signal}`).catch(async () => {
    child.kill('SIGKILL');
    await exited;
  });
}

async function post(clientUrl: string, path: string, body: unknown, ms = 1_000): Promise<unknown> {
  const response = await fetch(`${clientUrl}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(ms),
  });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

async function healthy(member: EtcdMember): Promise<boolean> {
  if (member.process === undefined) return false;
  try {
    const response = await fetch(`${member.clientUrl}/health`, { signal: AbortSignal.timeout(1_000) });
    return response.ok && ((await response.json()) as { health?: string }).health === 'true';
  } catch {
    return false;
  }
}

/** The status of the etcd member at `clientUrl` (its id, its leader's), from etcd's JSON gateway; undefined if it did not answer within 1 s. */
export async function memberStatus(clientUrl: string): Promise<MemberStatus | undefined> {
  try {
    return (await post(clientUrl, '/v3/maintenance/status', {})) as MemberStatus;
  } catch {
    return undefined;
  }
}

// Lockserver nodes

export interface NodeOptions {
  /** --name; n1, n2, … by default. */
  readonly name?: string;
  /** Directory for the node's hosts, lock and stat files; a fresh one under the cluster's dir by default. */
  readonly dir?: string;
  /** Further CLI arguments (--commit-timeout, --candidate-priority, …). */
  readonly args?: readonly string[];
  /** Wait for `event=ready` (default) or return at once (a node that cannot become ready yet). */
  readonly waitReady?: boolean;
}

/**
 * The lockserver nodes of one cluster (a unique --cluster name per test) over an EtcdCluster.
 * Each node has its own directory (hosts, lock and stat files) and its --name; restarting a
 * node reuses both.
 */
export class LockCluster {
  readonly name = `t${randomBytes(5).toString('hex')}`;
  readonly nodes: ServerProcess[] = [];
  private readonly names = new Map<ServerProcess, { name: string; args: readonly string[] }>();

  constructor(
    private readonly t: ExecutionContext,
    readonly etcd: EtcdCluster,
  ) {}

  /** Starts `count` nodes n1…n<count> (in parallel) and waits for each to be ready. */
  async startNodes(count: number, args: readonly string[] = []): Promise<ServerProcess[]> {
    return Promise.all(Array.from({ length: count }, (_, i) => this.startNode({ name: `n${i + 1}`, args })));
  }

  async startNode(options: NodeOptions = {}): Promise<ServerProcess> {
    const name = options.name ?? `n${this.nodes.length + 1}`;
    const dir = options.dir ?? join(this.etcd.dir, `node-${name}-${this.nodes.length}`);
    await mkdir(dir, { recursive: true });
    const files = serverFiles(dir);
    await writeFile(files.hostsFile, LOOPBACK_HOSTS);
    const args = [...serverArgs(dir), '--etcd', this.etcd.endpoints, '--cluster', this.name, '--name', name, ...(options.args ?? [])];
    const child = track(spawnLockserver(args, dir));
    const node = new ServerProcess(child, this.t, dir, files.hostsFile, files.lockFile, files.statFile);
    this.t.teardown(async () => {
      await node.kill();
      if (!this.t.passed) this.t.log(`--- node ${name} (pid ${child.pid}) ---\n${node.lines.slice(-30).join('\n')}`);
    });
    this.nodes.push(node);
    this.names.set(node, { name, args: options.args ?? [] });
    if (options.waitReady !== false) await this.ready(node);
    return node;
  }

  /** Waits (bounded) for the node's `event=ready` and records its port. */
  async ready(node: ServerProcess, ms = NODE_READY_MS): Promise<ServerProcess> {
    const ready = await node.event('ready', () => true, ms);
    node.port = Number(ready.fields.port);
    if (!Number.isInteger(node.port) || node.port <= 0) throw new Error(`bad port in: ${ready.line}`);
    return node;
  }

  /** The node's --name. */
  nameOf(node: ServerProcess): string {
    return this.names.get(node)!.name;
  }

  /** Starts a node again with the name, directory and arguments of one that ended. */
  restart(node: ServerProcess, waitReady = true): Promise<ServerProcess> {
    const { name, args } = this.names.get(node)!;
    return this.startNode({ name, dir: node.dir, args, waitReady });
  }
}

/** An etcd cluster and a lockserver cluster over it with `nodes` ready nodes. */
export async function startCluster(
  t: ExecutionContext,
  { nodes = 3, args = [], fsync = false }: { nodes?: number; args?: readonly string[]; fsync?: boolean } = {},
): Promise<{ etcd: EtcdCluster; cluster: LockCluster; nodes: ServerProcess[] }> {
  const etcd = await EtcdCluster.start(t, { fsync });
  const cluster = new LockCluster(t, etcd);
  return { etcd, cluster, nodes: await cluster.startNodes(nodes, args) };
}

/**
 * A fresh cluster seeded from a stopped single node's lock file: a copy of it (under the etcd
 * cluster's dir) imported through n1 with --import-lock-file, then n2 joins. Returns the copy, both
 * nodes, and the entry count n1's `lock-file-imported` event reports.
 */
export async function clusterImporting(
  t: ExecutionContext,
  lockFile: string,
): Promise<{ cluster: LockCluster; saved: string; importer: ServerProcess; other: ServerProcess; entries: string | undefined }> {
  const etcd = await EtcdCluster.start(t, {});
  const cluster = new LockCluster(t, etcd);
  const saved = join(etcd.dir, 'from-single-node.locks');
  await copyFile(lockFile, saved);
  const importer = await cluster.startNode({ name: 'n1', args: ['--import-lock-file', saved] });
  const entries = (await importer.event('lock-file-imported')).fields.entries;
  const other = await cluster.startNode({ name: 'n2' });
  return { cluster, saved, importer, other, entries };
}

/**
 * Runs `work` on a fresh connection to `node` until it succeeds, bounded: while etcd elects a
 * leader or a member comes back, a node closes a connection whose command could not commit
 * within --commit-timeout. Only that (a closed connection, a refused connect) is retried.
 */
export async function untilAnswered<T>(node: ServerProcess, work: (client: RawClient) => Promise<T>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (let attempt = 1; ; attempt++) {
    let client: RawClient | undefined;
    try {
      client = await node.accepted();
      return await work(client);
    } catch (error) {
      const message = (error as Error).message;
      const retriable = /closed|ECONNRESET|ECONNREFUSED|EPIPE|incomplete reply/.test(message);
      if (!retriable || Date.now() >= deadline) throw new Error(`after ${attempt} attempt(s): ${message}`);
      await delay(POLL_MS);
    } finally {
      client?.destroy();
    }
  }
}

/** The batches per log value of every value still retained in etcd (`/<cluster>/batches/`). */
export async function batchesPerValue(endpoints: string[], cluster: string): Promise<number[]> {
  const raw = new Etcd3({ hosts: endpoints });
  try {
    const values = await raw.getAll().prefix(`/${cluster}/batches/`).buffers();
    return Object.values(values).map((v) => decodeValue(v).length);
  } finally {
    raw.close();
  }
}
