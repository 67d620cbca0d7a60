/**
 * The cluster the cluster scenarios measure: 3 etcd members and 3 lockserver nodes on 127.0.0.1,
 * started by the benchmark itself (etcd from the PATH), in a temp dir removed at the end. Members
 * and nodes can be killed (-9), paused (SIGSTOP) and restarted on their ports and data, as the
 * failover and scale scenarios need. Every process goes through spawnServer, so the benchmark's
 * exit (or Ctrl-C) kills whatever is left.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { Endpoint } from '../load/messages.js';
import { PROFILED_STOP_GRACE_MS, spawnServer, stopServer, which, type ServerProcess } from '../processes.js';
import { lockserverCli } from '../targets/LockServerTarget.js';

const LOOPBACK = '127.0.0.1';
const ETCD_READY_MS = 30_000;
/** Ready means "loaded the snapshot and caught up": with a million locks that takes a while. */
const NODE_READY_MS = 120_000;
const POLL_MS = 50;
/** Enough for the 480-connection loads and the 200 contenders. */
const NODE_MAX_CONNECTIONS = 4_096;
/** Room for the scale scenario's million held locks and the loads beside them. */
const NODE_MAX_LOCKS = 5_000_000;
const READY = /event=ready\b.*\bport=(\d+)/;
/** A node declares its address in etcd just after `ready` (within 5 s, or it logs peer-address-failed). */
const ANNOUNCE_WAIT_MS = 10_000;
/** A node's lines about where its appends go, and about links between nodes that failed. */
const APPEND_ROUTE = /\bevent=append-route via=(\S+)(?: to=(\S+))?/;
const PEER_ADDRESS = /\bevent=peer-address address=(\S+)/;
const LINK_TROUBLE = /\bevent=(peer-address-failed|peer-link-failed|peer-refused)\b/;
/** A node's lines saying a client was refused or cut off for the node's own slowness. */
const CLIENT_TROUBLE = /\bevent=(stale-input-refused|commit-timeout|unread-output-dropped)\b/;
/** A node's lines about who leads and whether it still holds its name. */
const LEADERSHIP = /\bevent=(leader|node-silent|name-lost|name-held)\b/;

export interface ClusterOptions {
  /** Extra node flags for every lockserver node (--cpu-prof …). */
  readonly nodeFlags?: readonly string[];
  /** Where every node's output is appended (each line prefixed with the node's name), if anywhere. */
  readonly nodeLog?: string;
  /** Further lockserver arguments for every node (--snapshot-every …). */
  readonly nodeArgs?: readonly string[];
  /** Called with each line a node logs (after its `node=<name>` is known). */
  readonly onNodeLine?: (node: string, line: string) => void;
  /** Start the etcd members only, no lockserver node (etcd's own rows of the handoff scenario). */
  readonly etcdOnly?: boolean;
  /** The lockserver.js every node runs (--server-root; lockserverCli). */
  readonly cli?: string;
  /** Further arguments of one node only, by name (`n1: ['--import-lock-file', …]`), after nodeArgs; see BenchCluster.nodeOnlyArgs. */
  readonly nodeArgsByName?: Readonly<Record<string, readonly string[]>>;
  /** How long a node may take from spawn to `event=ready` (default 120 s). */
  readonly readyTimeoutMs?: number;
}

/** One member's view of its backend, from POST /v3/maintenance/status. */
export interface MemberStatus {
  readonly member: string;
  /** The bbolt file's size: what etcd compares with its quota. */
  readonly dbSize: number;
  /** Of that, the pages in use (etcd 3.4 and later); the rest is free pages only a defragmentation returns. */
  readonly dbSizeInUse?: number;
}

export interface Member {
  readonly name: string;
  readonly clientUrl: string;
  readonly peerPort: number;
  readonly dataDir: string;
  process: ServerProcess | undefined;
}

export interface Node {
  readonly name: string;
  readonly port: number;
  readonly dir: string;
  process: ServerProcess | undefined;
  paused: boolean;
}

/** A node's `append-route` line: where its appends go from `at` on (`own-sequencer`, `forwarded 127.0.0.1:…`, `direct`). */
export interface AppendRouteEvent {
  readonly node: string;
  readonly route: string;
  readonly at: number;
}

/** A node's line saying a link between nodes failed or was refused, or its address could not be declared. */
export interface LinkTroubleEvent {
  readonly node: string;
  readonly line: string;
  readonly at: number;
}

/** Why the cluster scenarios cannot run here, or undefined when they can. */
export async function clusterUnavailableReason(): Promise<string | undefined> {
  return (await which('etcd')) === undefined ? 'etcd is not on the PATH (Debian/Ubuntu: apt-get install etcd-server)' : undefined;
}

/** `count` distinct free loopback ports, held together while chosen. */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once('error', reject);
          server.listen(0, LOOPBACK, () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/** Total size in bytes of the files under `path` (0 when it is missing). */
export async function directoryBytes(path: string): Promise<number> {
  let total = 0;
  let entries;
  try {
    entries = await readdir(path, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const full = join(path, entry.name);
    if (entry.isDirectory()) total += await directoryBytes(full);
    else if (entry.isFile()) total += (await stat(full).catch(() => ({ size: 0 }))).size;
  }
  return total;
}

export class BenchCluster {
  /** The lockserver leader as the nodes last logged it (event=leader … self=true), if any. */
  lockLeader: string | undefined;
  /** Every change of a node's append route, as logged, in order. */
  readonly appendRoutes: AppendRouteEvent[] = [];
  /** Each node's address for links from the others, as it declared it in etcd (event=peer-address). */
  readonly peerAddresses = new Map<string, string>();
  readonly linkTrouble: LinkTroubleEvent[] = [];
  /** Every line of a node saying it refused input as stale, gave a commit up, or dropped unread output. */
  readonly clientTrouble: LinkTroubleEvent[] = [];
  /** Every line of a node about leadership and its name (leader, node-silent, name-lost, name-held). */
  readonly leadershipLines: LinkTroubleEvent[] = [];
  /** Each node's own further arguments (ClusterOptions.nodeArgsByName), which a scenario may change before a restart. */
  readonly nodeOnlyArgs: Map<string, readonly string[]>;
  private readonly nodeLog: WriteStream | undefined;

  private constructor(
    readonly dir: string,
    readonly members: readonly Member[],
    readonly nodes: readonly Node[],
    private readonly etcdArgs: (m: Member) => string[],
    private readonly nodeArgs: (n: Node) => string[],
    private readonly options: ClusterOptions,
  ) {
    this.nodeLog = options.nodeLog === undefined ? undefined : createWriteStream(options.nodeLog, { flags: 'a' });
    this.nodeOnlyArgs = new Map(Object.entries(options.nodeArgsByName ?? {}));
  }

  /** Starts 3 etcd members, waits until healthy, then 3 nodes (unless etcdOnly), and waits until each is ready. */
  static async start(options: ClusterOptions = {}, size = 3): Promise<BenchCluster> {
    const dir = await mkdtemp(join(tmpdir(), 'lockserver-bench-cluster-'));
    const ports = await freePorts(size * 3);
    const members: Member[] = Array.from({ length: size }, (_, i) => ({
      name: `m${i + 1}`,
      clientUrl: `http://${LOOPBACK}:${ports[2 * i]}`,
      peerPort: ports[2 * i + 1]!,
      dataDir: join(dir, `m${i + 1}.etcd`),
      process: undefined,
    }));
    const nodes: Node[] = Array.from({ length: size }, (_, i) => ({
      name: `n${i + 1}`,
      port: ports[2 * size + i]!,
      dir: join(dir, `n${i + 1}`),
      process: undefined,
      paused: false,
    }));
    const token = `lockserver-bench-${randomBytes(6).toString('hex')}`;
    const initialCluster = members.map((m) => `${m.name}=http://${LOOPBACK}:${m.peerPort}`).join(',');
    // etcd's defaults otherwise (heartbeat 100 ms, election 1 s, fsync on), as an operator runs it.
    // prettier-ignore
    const etcdArgs = (m: Member): string[] => [
      '--name', m.name,
      '--data-dir', m.dataDir,
      '--listen-client-urls', m.clientUrl,
      '--advertise-client-urls', m.clientUrl,
      '--listen-peer-urls', `http://${LOOPBACK}:${m.peerPort}`,
      '--initial-advertise-peer-urls', `http://${LOOPBACK}:${m.peerPort}`,
      '--initial-cluster', initialCluster,
      '--initial-cluster-token', token,
      '--initial-cluster-state', 'new',
      '--logger', 'zap',
      '--log-level', 'warn',
    ];
    const endpoints = members.map((m) => m.clientUrl).join(',');
    const clusterName = `bench${randomBytes(4).toString('hex')}`;
    // prettier-ignore
    const nodeArgs = (n: Node): string[] => [
      ...(options.nodeFlags ?? []),
      options.cli ?? lockserverCli(undefined),
      '--port', String(n.port),
      '--listen', LOOPBACK,
      '--hosts', join(dir, 'hosts'),
      '--lock-file', join(n.dir, 'locks'),
      '--stat-file', join(n.dir, 'stats'),
      '--max-connections', String(NODE_MAX_CONNECTIONS),
      '--max-locks', String(NODE_MAX_LOCKS),
      '--etcd', endpoints,
      '--cluster', clusterName,
      '--name', n.name,
      ...(options.nodeArgs ?? []),
      ...(cluster.nodeOnlyArgs.get(n.name) ?? []),
    ];
    // Every node's hosts file admits the load generator and the links from the other nodes, which
    // all dial from 127.0.0.1: a follower forwards its batches to the leader over its lock port.
    await writeFile(join(dir, 'hosts'), `${LOOPBACK}\n::1\n`);
    const cluster = new BenchCluster(dir, members, nodes, etcdArgs, nodeArgs, options);
    try {
      await Promise.all(members.map((m) => cluster.startMember(m, false)));
      await Promise.all(members.map((m) => cluster.waitHealthy(m)));
      if (options.etcdOnly !== true) {
        await Promise.all(nodes.map((n) => cluster.startNode(n)));
        await cluster.waitAnnounced();
      }
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  /** The nodes' client endpoints, in node order (the load spreads connections over them). */
  get endpoints(): Endpoint[] {
    return this.nodes.map((n) => ({ host: LOOPBACK, port: n.port }));
  }

  get etcdEndpoints(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  nodePids(): Array<number | undefined> {
    return this.nodes.map((n) => n.process?.pid);
  }

  memberPids(): Array<number | undefined> {
    return this.members.map((m) => m.process?.pid);
  }

  async startMember(member: Member, wait = true): Promise<void> {
    if (member.process !== undefined) throw new Error(`etcd member ${member.name} is still running`);
    // etcd logs nothing we wait for: "ready" is its /health, polled below.
    member.process = await spawnServer('etcd', this.etcdArgs(member), { readyPattern: null, readyTimeoutMs: ETCD_READY_MS });
    if (wait) await this.waitHealthy(member);
  }

  /** Resolves once the member answers /health with true (bounded). */
  async waitHealthy(member: Member, ms = ETCD_READY_MS): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      try {
        const response = await fetch(`${member.clientUrl}/health`, { signal: AbortSignal.timeout(1_000) });
        if (response.ok && ((await response.json()) as { health?: string }).health === 'true') return;
      } catch {
        // not up yet
      }
      if (Date.now() >= deadline) throw new Error(`etcd member ${member.name} not healthy within ${ms} ms`);
      await delay(POLL_MS);
    }
  }

  /** Starts (or restarts, on its port and directory) a node; resolves with ms from spawn to `event=ready`. */
  async startNode(node: Node): Promise<number> {
    if (node.process !== undefined) throw new Error(`node ${node.name} is still running`);
    await mkdir(node.dir, { recursive: true });
    const t0 = Date.now();
    node.process = await spawnServer(process.execPath, this.nodeArgs(node), {
      readyPattern: READY,
      readyTimeoutMs: this.options.readyTimeoutMs ?? NODE_READY_MS,
      onLine: (line) => {
        this.nodeLog?.write(`${node.name} ${line}\n`);
        const leader = line.match(/\bevent=leader leader=(\S+) self=true\b/);
        if (leader !== null) this.lockLeader = leader[1];
        const route = APPEND_ROUTE.exec(line);
        if (route !== null) this.appendRoutes.push({ node: node.name, route: route[2] === undefined ? route[1]! : `${route[1]} ${route[2]}`, at: Date.now() });
        const address = PEER_ADDRESS.exec(line);
        if (address !== null) this.peerAddresses.set(node.name, address[1]!);
        if (LINK_TROUBLE.test(line)) this.linkTrouble.push({ node: node.name, line: line.replace(/^ts=\S+ /, ''), at: Date.now() });
        if (CLIENT_TROUBLE.test(line)) this.clientTrouble.push({ node: node.name, line: line.replace(/^ts=\S+ /, ''), at: Date.now() });
        if (LEADERSHIP.test(line)) this.leadershipLines.push({ node: node.name, line: line.replace(/^ts=\S+ /, ''), at: Date.now() });
        this.options.onNodeLine?.(node.name, line);
      },
      cwd: node.dir,
    });
    node.paused = false;
    return Date.now() - t0;
  }

  /** Each node's append route as it last logged it (`n1 own-sequencer`, `n2 forwarded 127.0.0.1:…`; `n3 none yet`). */
  currentRoutes(): string[] {
    const last = new Map<string, string>();
    for (const e of this.appendRoutes) last.set(e.node, e.route);
    return this.nodes.map((n) => `${n.name} ${last.get(n.name) ?? 'none yet'}`);
  }

  /**
   * Resolves once every node declared, in etcd, the address the others forward their batches to:
   * its own lock port on 127.0.0.1 (what `--listen` names). Rejects if one could not, or declared
   * another address: its followers would append directly, which is not the design measured.
   */
  private async waitAnnounced(ms = ANNOUNCE_WAIT_MS): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      const failed = this.linkTrouble.find((e) => e.line.startsWith('event=peer-address-failed'));
      if (failed !== undefined) throw new Error(`node ${failed.node} could not declare its address: ${failed.line}`);
      if (this.nodes.every((n) => this.peerAddresses.has(n.name))) break;
      if (Date.now() >= deadline) {
        const missing = this.nodes.filter((n) => !this.peerAddresses.has(n.name)).map((n) => n.name);
        throw new Error(`node(s) ${missing.join(', ')} declared no address for links within ${ms} ms`);
      }
      await delay(POLL_MS);
    }
    for (const n of this.nodes) {
      const declared = this.peerAddresses.get(n.name);
      if (declared !== `${LOOPBACK}:${n.port}`) throw new Error(`node ${n.name} declared ${declared} for links, not ${LOOPBACK}:${n.port}, its lock port`);
    }
  }

  /** kill -9 of a node, awaited. */
  async killNode(node: Node): Promise<void> {
    const running = node.process;
    node.process = undefined;
    node.paused = false;
    if (running !== undefined) await stopServer(running, 0);
  }

  pauseNode(node: Node): void {
    node.process?.child.kill('SIGSTOP');
    node.paused = true;
  }

  resumeNode(node: Node): void {
    node.process?.child.kill('SIGCONT');
    node.paused = false;
  }

  /** kill -9 of an etcd member, awaited. */
  async killMember(member: Member): Promise<void> {
    const running = member.process;
    member.process = undefined;
    if (running !== undefined) await stopServer(running, 0);
  }

  /** The member leading etcd's Raft group now, from POST /v3/maintenance/status (bounded). */
  async leader(ms = ETCD_READY_MS): Promise<Member> {
    const deadline = Date.now() + ms;
    for (;;) {
      const live = this.members.filter((m) => m.process !== undefined);
      const statuses = await Promise.all(
        live.map(async (m) => {
          try {
            const response = await fetch(`${m.clientUrl}/v3/maintenance/status`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(1_000) });
            return { m, s: (await response.json()) as { header: { member_id: string }; leader: string } };
          } catch {
            return undefined;
          }
        }),
      );
      const byId = new Map<string, Member>();
      for (const st of statuses) if (st !== undefined) byId.set(st.s.header.member_id, st.m);
      for (const st of statuses) {
        const leader = st === undefined ? undefined : byId.get(st.s.leader);
        if (leader !== undefined) return leader;
      }
      if (Date.now() >= deadline) throw new Error(`no etcd leader within ${ms} ms`);
      await delay(POLL_MS);
    }
  }

  /** Each running member's dbSize and dbSizeInUse, as it reports them (undefined for one that did not answer). */
  memberStatus(): Promise<Array<MemberStatus | undefined>> {
    return Promise.all(
      this.members.map(async (m) => {
        try {
          const response = await fetch(`${m.clientUrl}/v3/maintenance/status`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(5_000) });
          // The gateway writes int64 fields as strings.
          const s = (await response.json()) as { dbSize?: string; dbSizeInUse?: string };
          if (s.dbSize === undefined) return undefined;
          return { member: m.name, dbSize: Number(s.dbSize), ...(s.dbSizeInUse !== undefined ? { dbSizeInUse: Number(s.dbSizeInUse) } : {}) };
        } catch {
          return undefined;
        }
      }),
    );
  }

  /** Bytes of each member's bbolt database file (member/snap/db), which compaction alone never shrinks. */
  memberDbBytes(): Promise<number[]> {
    return Promise.all(
      this.members.map((m) =>
        stat(join(m.dataDir, 'member', 'snap', 'db')).then(
          (s) => s.size,
          () => 0,
        ),
      ),
    );
  }

  /** Bytes in each member's data dir (its bbolt database, WAL and Raft snapshots). */
  memberDataBytes(): Promise<number[]> {
    return Promise.all(this.members.map((m) => directoryBytes(m.dataDir)));
  }

  /** Ends every node (gently when profiled, so profiles are written), then every member; removes the dir. */
  async stop(): Promise<void> {
    const grace = (this.options.nodeFlags ?? []).length > 0 ? PROFILED_STOP_GRACE_MS : 0;
    await Promise.all(
      this.nodes.map(async (n) => {
        if (n.paused) this.resumeNode(n);
        const running = n.process;
        n.process = undefined;
        if (running !== undefined) await stopServer(running, grace);
      }),
    );
    await Promise.all(this.members.map((m) => this.killMember(m)));
    this.nodeLog?.end();
    await rm(this.dir, { recursive: true, force: true });
  }
}
