import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { memberStatus } from '../etcdCluster.js';
import { bundlesSent } from '../metrics.js';
import { CLI_PATH, LoggedProcess, serverFiles } from '../serverProcess.js';
import { cut, heal } from './blackhole.js';
import type { Host, NetLab } from './network.js';
import { DelayRelay } from './relay.js';

export const LOCK_PORT = 7734;
/** Where a node serves its metrics, on its client address. */
const METRICS_PORT = 7736;
const SCRAPE_MS = 2_000;
const ETCD_CLIENT_PORT = 2379;
const ETCD_PEER_PORT = 2380;
const HEALTHY_MS = 30_000;
const READY_MS = 30_000;

export interface NetMember {
  readonly host: Host;
  readonly clientUrl: string;
  readonly dataDir: string;
  readonly logFile: string;
  pid: number | undefined;
}

export interface NetNode {
  readonly host: Host;
  readonly dir: string;
  /** relays[j]: this node's way to member j. */
  readonly relays: DelayRelay[];
  proc: LoggedProcess | undefined;
  /** Lines of earlier incarnations (kill -9 and restart), for a failing run's report. */
  readonly pastLines: string[];
}

/**
 * etcd members and lockserver nodes, each a process in its own namespace of a NetLab. Every
 * node reaches every member through a DelayRelay in the root namespace (delay 0 until a fault
 * sets it), over its backend link; clients reach nodes on the client network at port 7734.
 */
export class NetCluster {
  readonly name = `nm${randomBytes(4).toString('hex')}`;
  readonly members: NetMember[];
  readonly nodes: NetNode[] = [];

  private constructor(
    readonly lab: NetLab,
    readonly dir: string,
    private readonly nodeArgs: readonly string[],
  ) {
    this.members = lab.members.map((host) => ({
      host,
      clientUrl: `http://${host.backendAddress}:${ETCD_CLIENT_PORT}`,
      dataDir: join(dir, `${host.name}.etcd`),
      logFile: join(dir, `${host.name}.log`),
      pid: undefined,
    }));
  }

  static async start(lab: NetLab, nodeArgs: readonly string[] = []): Promise<NetCluster> {
    const dir = await mkdtemp(join(tmpdir(), 'lockserver-nemesis-'));
    const cluster = new NetCluster(lab, dir, nodeArgs);
    try {
      for (const member of cluster.members) await cluster.spawnMember(member);
      await cluster.waitHealthy();
      for (const host of lab.nodes) {
        const relays = await Promise.all(
          cluster.members.map((m) => DelayRelay.start(lab.root.backendAddress, { host: m.host.backendAddress, port: ETCD_CLIENT_PORT })),
        );
        cluster.nodes.push({ host, dir: join(dir, `node-${host.name}`), relays, proc: undefined, pastLines: [] });
      }
      await Promise.all(cluster.nodes.map((n) => cluster.startNode(n)));
    } catch (error) {
      await cluster.destroy();
      throw error;
    }
    return cluster;
  }

  private async spawnMember(member: NetMember): Promise<void> {
    const peer = (m: NetMember): string => `http://${m.host.backendAddress}:${ETCD_PEER_PORT}`;
    // prettier-ignore
    const args = [
      '--name', member.host.name,
      '--data-dir', member.dataDir,
      '--listen-client-urls', member.clientUrl,
      '--advertise-client-urls', member.clientUrl,
      '--listen-peer-urls', peer(member),
      '--initial-advertise-peer-urls', peer(member),
      '--initial-cluster', this.members.map((m) => `${m.host.name}=${peer(m)}`).join(','),
      '--initial-cluster-token', this.name,
      '--initial-cluster-state', 'new',
      // As test/helpers/etcdCluster.ts: looser than the defaults on a small shared machine, logs at info.
      '--heartbeat-interval', '200',
      '--election-timeout', '2000',
      '--logger', 'zap',
      '--log-level', 'info',
      '--unsafe-no-fsync',
    ];
    const log = createWriteStream(member.logFile, { flags: 'a' });
    await new Promise((resolve) => log.once('open', resolve));
    // `ip netns exec` enters the namespace and execs etcd: the pid is etcd's own.
    const child = spawn('ip', ['netns', 'exec', member.host.ns, 'etcd', ...args], { stdio: ['ignore', log, log] });
    child.once('exit', () => {
      log.end();
      if (member.pid === child.pid) member.pid = undefined;
    });
    member.pid = child.pid;
  }

  async waitHealthy(ms = HEALTHY_MS): Promise<void> {
    const deadline = Date.now() + ms;
    for (const member of this.members) {
      while (!(await memberHealthy(member))) {
        if (Date.now() >= deadline) {
          // Every member's log: a member without a leader answers nothing and logs nothing at warn.
          const logs = await Promise.all(this.members.map((m) => this.memberLog(m, 25)));
          throw new Error(`etcd member ${member.host.name} not healthy within ${ms} ms\n${logs.join('\n')}`);
        }
        await delay(100);
      }
    }
  }

  async memberLog(member: NetMember, lines = 15): Promise<string> {
    const text = await readFile(member.logFile, 'utf8').catch(() => '');
    return `--- etcd ${member.host.name} ---\n${text
      .split('\n')
      .slice(-lines - 1)
      .join('\n')}`;
  }

  /** Starts (or restarts, on the same directory and name) a node and waits for `event=ready`. */
  async startNode(node: NetNode): Promise<void> {
    await mkdir(node.dir, { recursive: true });
    const files = serverFiles(node.dir);
    // The clients, and the other nodes, whose links to the leader's sequencer come to the lock port
    // from their backend addresses (the address each learns as the one it reaches etcd from).
    const peers = this.lab.nodes.map((h) => `${h.backendAddress}\n`).join('');
    await writeFile(files.hostsFile, `${this.lab.root.clientAddress}\n${peers}`);
    // prettier-ignore
    const args = [
      '--port', String(LOCK_PORT),
      '--hosts', files.hostsFile,
      '--lock-file', files.lockFile,
      '--stat-file', files.statFile,
      '--etcd', node.relays.map((r) => r.url).join(','),
      '--cluster', this.name,
      '--name', node.host.name,
      '--metrics-port', String(METRICS_PORT),
      '--metrics-listen', node.host.clientAddress!,
      ...this.nodeArgs,
    ];
    if (node.proc !== undefined) node.pastLines.push(...node.proc.lines, `--- ${node.host.name} restarted ---`);
    const proc = new LoggedProcess(
      spawn('ip', ['netns', 'exec', node.host.ns, process.execPath, CLI_PATH, ...args], { cwd: node.dir, stdio: ['ignore', 'ignore', 'pipe'] }),
    );
    node.proc = proc;
    await proc.event('ready', () => true, READY_MS);
  }

  /** The node that said last that it leads (its latest `event=leader` has self=true), if any. */
  leaderNode(): NetNode | undefined {
    let best: { node: NetNode; at: number } | undefined;
    for (const node of this.nodes) {
      const events = node.proc?.eventsNamed('leader') ?? [];
      const last = events.at(-1);
      if (last === undefined || last.fields.self !== 'true' || node.proc?.running !== true) continue;
      const at = events.length === 0 ? 0 : Date.parse(last.fields.ts ?? '') || 0;
      if (best === undefined || at > best.at) best = { node, at };
    }
    return best?.node;
  }

  /**
   * The etcd member that leads now, as the members say (their status: their own id and their
   * leader's); undefined when no two members answered agreeing on a leader they both know.
   */
  async leaderMember(): Promise<NetMember | undefined> {
    const statuses = await Promise.all(this.members.map(async (m) => (m.pid === undefined ? undefined : memberStatus(m.clientUrl))));
    const ids = statuses.map((st) => st?.header.member_id);
    const leaders = statuses.flatMap((st) => (st === undefined || st.leader === '0' ? [] : [st.leader]));
    const agreed = leaders.find((id) => leaders.filter((other) => other === id).length >= 2);
    const at = agreed === undefined ? -1 : ids.indexOf(agreed);
    return at < 0 ? undefined : this.members[at];
  }

  /** The member the nodes hold the most relayed connections to: the one whose fault they feel. */
  busiestMember(): NetMember {
    const load = (j: number): number => this.nodes.reduce((sum, n) => sum + n.relays[j]!.connections, 0);
    let best = 0;
    for (let j = 1; j < this.members.length; j++) if (load(j) > load(best)) best = j;
    return this.members[best]!;
  }

  // Faults, each on one process or one link; each has its heal.

  pauseMember(member: NetMember): void {
    if (member.pid !== undefined) process.kill(member.pid, 'SIGSTOP');
  }

  resumeMember(member: NetMember): void {
    if (member.pid !== undefined) process.kill(member.pid, 'SIGCONT');
  }

  /** Cuts the member's only link: it reaches neither the other members nor any node. */
  isolateMember(member: NetMember): void {
    cut(member.host.backendLink);
  }

  rejoinMember(member: NetMember): void {
    heal(member.host.backendLink);
  }

  /** Cuts the node's link to etcd (every member); its clients still reach it. */
  cutNode(node: NetNode): void {
    cut(node.host.backendLink);
  }

  healNode(node: NetNode): void {
    heal(node.host.backendLink);
  }

  delayLink(node: NetNode, member: NetMember, ms: number): void {
    node.relays[this.members.indexOf(member)]!.delayMs = ms;
  }

  pauseNode(node: NetNode): void {
    node.proc?.signal('SIGSTOP');
  }

  resumeNode(node: NetNode): void {
    node.proc?.signal('SIGCONT');
  }

  /** kill -9, awaited (bounded). */
  async killNode(node: NetNode): Promise<void> {
    await node.proc?.kill();
  }

  /** Heals every fault this class can make (a failed run's first step before its checks). */
  healAll(): void {
    for (const member of this.members) {
      this.resumeMember(member);
      this.rejoinMember(member);
    }
    for (const node of this.nodes) {
      this.healNode(node);
      this.resumeNode(node);
      for (const relay of node.relays) relay.delayMs = 0;
    }
  }

  /** How many lines of every node's logs (all incarnations) match `pattern`. */
  countLines(pattern: RegExp): number {
    return this.nodes.reduce((sum, n) => sum + [...n.pastLines, ...(n.proc?.lines ?? [])].filter((line) => pattern.test(line)).length, 0);
  }

  /**
   * Appends carrying several nodes' batches that the running nodes' sequencers sent in their
   * present lives (their metrics); a node that does not answer its metrics in time counts none.
   */
  async sequencerBundles(): Promise<number> {
    const counts = await Promise.all(
      this.nodes
        .filter((n) => n.proc?.running === true)
        .map(async (n) => {
          try {
            const response = await fetch(`http://${n.host.clientAddress!}:${METRICS_PORT}/metrics`, { signal: AbortSignal.timeout(SCRAPE_MS) });
            return bundlesSent(await response.text());
          } catch {
            return 0;
          }
        }),
    );
    return counts.reduce((a, b) => a + b, 0);
  }

  /** The last lines of every node (incarnations included), for a failure report. */
  nodeLogs(lines = 25): string {
    return this.nodes.map((n) => `--- node ${n.host.name} ---\n${[...n.pastLines, ...(n.proc?.lines ?? [])].slice(-lines).join('\n')}`).join('\n');
  }

  /** Kills every process (paused ones too), closes the relays, removes the data directory. */
  async destroy(): Promise<void> {
    for (const node of this.nodes) {
      node.proc?.signal('SIGCONT');
      await node.proc?.kill();
      await Promise.all(node.relays.map((r) => r.close()));
    }
    for (const member of this.members) {
      const pid = member.pid;
      if (pid === undefined) continue;
      for (const signal of ['SIGCONT', 'SIGKILL'] as const) {
        try {
          process.kill(pid, signal);
        } catch {
          // gone
        }
      }
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}

async function memberHealthy(member: NetMember): Promise<boolean> {
  if (member.pid === undefined) return false;
  try {
    const response = await fetch(`${member.clientUrl}/health`, { signal: AbortSignal.timeout(1_000) });
    return response.ok && ((await response.json()) as { health?: string }).health === 'true';
  } catch {
    return false;
  }
}
