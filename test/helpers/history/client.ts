import { setTimeout as delay } from 'node:timers/promises';
import { Command } from '../../../src/protocol/constants.js';
import type { Reply } from '../../../src/protocol/decodeReply.js';
import type { Contender, QueueView, Request } from '../../../src/protocol/messages.js';
import { Connection, Unanswered } from './connection.js';
import type { History, ListEntry, OpInput, ReplyValue } from './history.js';

/** A lockserver node as clients reach it. */
export interface Endpoint {
  readonly name: string;
  readonly host: string;
  readonly port: number;
}

export interface ClientOptions {
  readonly history: History;
  readonly nodes: readonly Endpoint[];
  /** Source address of every connection (the address the nodes' hosts files allow). */
  readonly localAddress?: string;
  /** A command not answered within this closes its connection and is recorded without a reply. */
  readonly replyBoundMs: number;
  /**
   * How long after its send a command this client gave up on may still take effect (README,
   * Guarantees: 1 s of a stalled node + --commit-timeout + the log's lateCommitMs). The client
   * sends nothing more on that key until then, as the README asks of a client that gives up on a
   * node before the node closed the connection; 0 = the client does not wait.
   */
  readonly unansweredMayLandMs?: number;
  readonly connectBoundMs: number;
  /** Whether the run is over (connect loops give up). */
  readonly stopped: () => boolean;
}

const CMD: Record<OpInput['cmd'], Command> = {
  owner: Command.FindOwner,
  request: Command.Request,
  location: Command.FindLocation,
  renew: Command.Renew,
  release: Command.Release,
  releaseAll: Command.ReleaseAll,
  list: Command.List,
};

const ALL_KEYS = '\u0000all keys';

function toRequest(op: OpInput): Request {
  const [key, index, owner] = [op.key ?? '', op.index ?? '', op.owner ?? ''];
  switch (op.cmd) {
    case 'owner':
      return { command: Command.FindOwner, key, index };
    case 'request':
      return { command: Command.Request, key, index, owner, ttl: op.ttl ?? 0, ttw: op.ttw ?? 0, priority: 0 };
    case 'releaseAll':
      return { command: Command.ReleaseAll, owner };
    case 'list':
      return { command: Command.List, key };
    default:
      return { command: CMD[op.cmd] as typeof Command.FindLocation, key, index, owner };
  }
}

function toValue(reply: Reply): ReplyValue {
  if (!Array.isArray(reply)) return reply as number | string | boolean;
  // A detailed list (0x0D) is recorded as the plain list it contains.
  const entries = reply.flatMap((item: Contender | QueueView): readonly Contender[] => ('entries' in item ? item.entries : [item]));
  return entries.map((c): ListEntry => ({ index: c.index, owner: c.owner, isOwner: c.isOwner }));
}

/**
 * A client with its own owner name that talks to one node at a time and fails over to the next
 * when its connection closes or a command goes unanswered within the bound (that connection is
 * closed, the command recorded without a reply). With `home`, it goes back to its home node a
 * while after failing over, as clients with a preferred server do. Every command is recorded.
 */
export class FailoverClient {
  private connection: Connection | undefined;
  private current: number;
  private awaySince: number | undefined;
  /** Per key (ALL_KEYS for a 0x06), until when a command given up on may still take effect. */
  private readonly mayLandUntil = new Map<string, number>();

  constructor(
    readonly name: string,
    private readonly options: ClientOptions,
    private readonly home: number,
    /** Only ever this node (a probe): no failover. */
    private readonly pinned = false,
    private readonly returnHomeMs = 3_000,
  ) {
    this.current = home;
  }

  get node(): Endpoint {
    return this.options.nodes[this.current]!;
  }

  /** A connection to the current node, failing over until one opens; undefined once stopped. */
  private async connect(): Promise<Connection | undefined> {
    if (this.awaySince !== undefined && Date.now() - this.awaySince >= this.returnHomeMs && !this.pinned) {
      this.connection?.close();
      this.connection = undefined;
      this.current = this.home;
      this.awaySince = undefined;
    }
    for (let attempt = 0; this.connection === undefined || this.connection.isClosed; attempt++) {
      if (this.options.stopped()) return undefined;
      if (attempt > 0) {
        this.failOver();
        if (attempt % this.options.nodes.length === 0 || this.pinned) await delay(200);
      }
      const node = this.node;
      try {
        this.connection = await Connection.open(node.host, node.port, this.options.localAddress, this.options.connectBoundMs);
      } catch {
        this.connection = undefined;
      }
    }
    return this.connection;
  }

  private failOver(): void {
    if (this.pinned) return;
    this.current = (this.current + 1) % this.options.nodes.length;
    this.awaySince = this.current === this.home ? undefined : (this.awaySince ?? Date.now());
  }

  /** Waits (bounded) until no command this client gave up on that touches `key` can still take effect. */
  private async untilSettled(key: string | undefined): Promise<void> {
    const until = Math.max(this.mayLandUntil.get(ALL_KEYS) ?? 0, key === undefined ? 0 : (this.mayLandUntil.get(key) ?? 0));
    const wait = until - Date.now();
    if (wait > 0) await delay(Math.min(wait, this.options.unansweredMayLandMs ?? 0));
  }

  /** Sends one command, recorded in the history; its reply, or undefined without one. */
  async call(input: Omit<OpInput, 'client' | 'node'>): Promise<ReplyValue | undefined> {
    if (input.cmd !== 'owner' && input.cmd !== 'list' && input.cmd !== 'location') await this.untilSettled(input.cmd === 'releaseAll' ? ALL_KEYS : input.key);
    const connection = await this.connect();
    if (connection === undefined) return undefined;
    const sentAt = Date.now();
    const op = this.options.history.begin({ ...input, client: this.name, node: this.node.name });
    try {
      const reply = toValue(await connection.call(toRequest({ ...op }), this.options.replyBoundMs));
      this.options.history.answer(op, reply);
      return reply;
    } catch (error) {
      if (!(error instanceof Unanswered)) throw error;
      this.options.history.fail(op, error.why);
      const mayLand = this.options.unansweredMayLandMs ?? 0;
      if (mayLand > 0 && op.cmd !== 'owner' && op.cmd !== 'list' && op.cmd !== 'location') {
        this.mayLandUntil.set(op.cmd === 'releaseAll' ? ALL_KEYS : (op.key ?? ''), sentAt + mayLand);
      }
      this.connection = undefined;
      this.failOver();
      return undefined;
    }
  }

  close(): void {
    this.connection?.close();
    this.connection = undefined;
  }
}
