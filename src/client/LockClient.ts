import { connect as connectSocket, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { bytesOf, MAX_STRING_LENGTH, type ByteString } from '../bytes.js';
import { DEFAULT_PORT } from '../defaultPort.js';
import { BufferWriter } from '../protocol/BufferWriter.js';
import { Command, COMMAND_NAMES, GREETING_ACCEPTED, GREETING_REFUSED, MAX_U16, MAX_U32, NO_WAIT_BOUND, type LossReason } from '../protocol/constants.js';
import { NOT_YET, ReplyDecoder, type ReplyOf } from '../protocol/decodeReply.js';
import { encodeRequest } from '../protocol/encodeRequest.js';
import type { Contender, EntryView, FencedPosition, Request, StatsReply } from '../protocol/messages.js';
import {
  AllHostsFailedError,
  ConnectError,
  ConnectionClosedError,
  ConnectTimeoutError,
  ExtensionUnsupportedError,
  FencingUnsupportedError,
  LockClientError,
  ProtocolError,
  RequestTimeoutError,
  ServerRefusedError,
} from './errors.js';
import { endpointsOf, HOST_ORDERS, type Endpoint, type HostAndPort, type HostOrder } from './hosts.js';
import { toByteString, type LockName, type StringEncoding } from './lockName.js';

export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 5_000;
/** Requests awaiting replies on one connection; a request beyond this is rejected, not queued. */
export const DEFAULT_MAX_IN_FLIGHT = 10_000;
export const DEFAULT_TTL_SECONDS = 30;
export const DEFAULT_TTW_SECONDS = 30;
export const DEFAULT_PRIORITY = 0;
const MAX_PRIORITY = 0xff;
const WRITE_BUFFER_INITIAL = 1024;
const WRITE_BUFFER_RETAINED = 64 * 1024;

export interface LockClientOptions {
  /** Server host name or address; default 127.0.0.1. */
  readonly host?: string;
  /** Server port; default 7734. With `hosts`: the port of entries that name none. */
  readonly port?: number;
  /**
   * Several nodes of one cluster instead of `host`: 'a:7734', 'b' (port: `port`), '[::1]:7734',
   * or { host, port }. Connecting tries them in `hostOrder` until one greets with 0x01.
   */
  readonly hosts?: ReadonlyArray<string | HostAndPort>;
  /** 'random-start' (default): from a random host, then on in list order; 'as-listed': from the first. */
  readonly hostOrder?: HostOrder;
  /** Local address to connect from (the server's allowlist sees this address). */
  readonly localAddress?: string;
  /** Limit for the TCP connection and the greeting byte together; default 5000 ms. */
  readonly connectTimeoutMs?: number;
  /** Limit for each reply, counted from when its request was issued; 0 = none. Default 5000 ms. */
  readonly requestTimeoutMs?: number;
  /** Most requests awaiting replies at once; default 10000. */
  readonly maxInFlight?: number;
  /** How string arguments become bytes: 'latin1' (default, byte strings) or 'utf8'. See LockName. */
  readonly stringEncoding?: StringEncoding;
}

/** TTL, TTW (seconds, 0–65535, 0 = never expires) and priority (0–255, higher first) of a request (0x02, 0x0A or 0x0B). */
export interface LockRequestOptions {
  readonly ttl?: number;
  readonly ttw?: number;
  readonly priority?: number;
}

/** An acquire-and-wait (0x0B): a request's options, and how long to wait for the lock. */
export interface AcquireOptions extends LockRequestOptions {
  /**
   * Milliseconds to wait for the lock at most (0 answers at once, as 0x0A does); undefined,
   * Infinity or NO_WAIT_BOUND wait without a bound: until the lock is granted or the entry ends.
   */
  readonly waitMs?: number;
}

/** One entry of a list (0x07) reply, with its raw bytes and its place in its (key, index) queue. */
export interface ListedEntry {
  readonly index: Buffer;
  readonly owner: Buffer;
  readonly priority: number;
  readonly ttl: number;
  readonly ttw: number;
  readonly isOwner: boolean;
  /**
   * 1 for the owner, 2 for first in line, … (counted within the entry's index), as location (0x03)
   * answers it: first in line is 2 also while nobody owns the lock (held back after its owner's
   * TTL ran out, --lock-delay).
   */
  readonly position: number;
}

/** One entry of a detailed list (0x0D) reply: what list() gives, and the time its phase has left and its token. */
export interface DetailedEntry extends ListedEntry {
  /** Milliseconds left in its current phase (TTL while it owns, TTW while it waits) by the server's clock; null = never expires. */
  readonly remainingMs: number | null;
  /** Its grant's fencing token while it owns; 0 while it waits. */
  readonly token: number;
}

/** One (key, index) queue of a detailed list (0x0D) reply, with its raw bytes. */
export interface DetailedQueue {
  readonly index: Buffer;
  /** Milliseconds its lock is still held back after its owner's TTL ran out (the server's --lock-delay); 0 when it is not. */
  readonly heldForMs: number;
  /** Owner first (none while held back), then the waiters in queue order. */
  readonly entries: readonly DetailedEntry[];
}

interface PendingReply {
  readonly command: Command;
  /** performance.now() when it was issued. */
  readonly sentAt: number;
  /**
   * How long its reply may take, counted from when it was issued or, behind a wait, from when
   * that wait was answered (see deadlineOf); Infinity: no limit.
   */
  readonly limitMs: number;
  readonly resolve: (reply: never) => void;
  readonly reject: (error: Error) => void;
}

/** Commands the server may take long to answer, holding back the connection's later replies until it does. */
function isWait(command: Command): boolean {
  return command === Command.AcquireWait || command === Command.AwaitLoss;
}

/** Extension commands (bytes 0.9b never used), which a server without them closes the connection on. */
const FENCING_COMMANDS: ReadonlySet<Command> = new Set([Command.Fence, Command.RequestFenced]);
const OTHER_EXTENSION_COMMANDS: ReadonlySet<Command> = new Set([Command.AcquireWait, Command.AwaitLoss, Command.ListDetailed]);

/** The wire's wait bound (0x0B) for `waitMs`: NO_WAIT_BOUND when there is none. */
function waitBound(waitMs: number | undefined): number {
  if (waitMs === undefined || waitMs === Infinity) return NO_WAIT_BOUND;
  return checkInteger('waitMs', waitMs, MAX_U32);
}

function checkInteger(name: string, value: number, max: number): number {
  if (!Number.isInteger(value) || value < 0 || value > max) {
    throw new RangeError(`${name} must be an integer from 0 to ${max}, got ${value}`);
  }
  return value;
}

function checkWireString(name: string, value: ByteString): void {
  if (value.length > MAX_STRING_LENGTH || /[^\x00-\xff]/.test(value)) {
    throw new RangeError(`${name} must be a byte string of at most ${MAX_STRING_LENGTH} bytes`);
  }
}

/** Rejects a malformed request before any of it is written, so the byte stream never carries half a frame. */
function checkRequest(request: Request): void {
  if (COMMAND_NAMES[request.command] === undefined) throw new RangeError(`no such command ${String(request.command)}`);
  if ('key' in request) checkWireString('key', request.key);
  if ('index' in request) checkWireString('index', request.index);
  if ('owner' in request) checkWireString('owner', request.owner);
  if (request.command === Command.Request || request.command === Command.RequestFenced || request.command === Command.AcquireWait) {
    checkInteger('ttl', request.ttl, MAX_U16);
    checkInteger('ttw', request.ttw, MAX_U16);
    checkInteger('priority', request.priority, MAX_PRIORITY);
  }
  if (request.command === Command.AcquireWait) checkInteger('waitMs', request.waitMs, MAX_U32);
}

/**
 * Each entry's place in its queue, as location (0x03) answers it, from a reply that gives every
 * queue's entries in order: the owner 1, its waiters 2, 3, … (a held-back lock has waiters only).
 */
function positionsOf(entries: readonly Contender[]): number[] {
  const waitersSeen = new Map<ByteString, number>();
  return entries.map((e) => {
    if (e.isOwner) return 1;
    const ahead = waitersSeen.get(e.index) ?? 0;
    waitersSeen.set(e.index, ahead + 1);
    return 2 + ahead;
  });
}

/** An entry of a list (0x07) reply as the caller sees it: raw bytes, and its place in its queue. */
function listedEntry(c: Contender, position: number): ListedEntry {
  return {
    index: bytesOf(c.index),
    owner: bytesOf(c.owner),
    priority: c.priority,
    ttl: c.ttl,
    ttw: c.ttw,
    isOwner: c.isOwner,
    position,
  };
}

/** An entry of a detailed list (0x0D) reply as the caller sees it. */
function detailedEntry(e: EntryView, position: number): DetailedEntry {
  return { ...listedEntry(e, position), remainingMs: e.remainingMs, token: e.token };
}

/**
 * A connection to a LockServer, speaking the 0.9b byte protocol through the project's codec.
 * Every command returns a promise; any number may be in flight at once (pipelining): requests
 * issued in the same tick go out in one write, and replies are matched to them in order.
 *
 *   const client = await LockClient.connect({ port: 7734 });
 *   const position = await client.request('users', '42', 'alice', { ttl: 30 });
 *   await client.close();
 */
export class LockClient {
  private readonly decoder = new ReplyDecoder();
  private readonly writer = new BufferWriter(WRITE_BUFFER_INITIAL, WRITE_BUFFER_RETAINED);
  private readonly pending: Array<PendingReply | undefined> = [];
  private head = 0;
  private flushQueued = false;
  private open = true;
  /** Set by close(): the server ends any wait when we half-close, and answers it no more. */
  private halfClosed = false;
  private timer: NodeJS.Timeout | undefined;
  /** The deadline the timer is set for (Infinity when it is not set). */
  private timerDeadline = Infinity;
  /** performance.now() when the last reply to a wait (0x0B, 0x0C) arrived: the requests behind it were held until then. */
  private waitAnsweredAt = -Infinity;
  private readonly requestTimeoutMs: number;
  private readonly maxInFlight: number;
  private readonly encoding: StringEncoding;
  /** Settles when the connection has closed, for whatever reason. */
  readonly closed: Promise<void>;
  /** host:port of the server this connection is to, for messages. */
  readonly address: string;

  private constructor(
    private readonly socket: Socket,
    private readonly endpoints: readonly Endpoint[],
    /** Which of the endpoints this connection is to. */
    private readonly endpointIndex: number,
    private readonly options: LockClientOptions,
  ) {
    const address = endpoints[endpointIndex]!.address;
    this.address = address;
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    this.encoding = options.stringEncoding ?? 'latin1';
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (error) => this.peerClosed(new ConnectionClosedError(`connection to ${address} failed: ${error.message}`, { cause: error })));
    socket.on('close', () => this.peerClosed(new ConnectionClosedError(`connection to ${address} closed`)));
  }

  /**
   * Connects and checks the greeting byte: 0x01 resolves, 0x00 rejects with ServerRefusedError.
   * With `hosts`, a host that refuses (0x00), cannot be reached or times out is passed over for
   * the next, each tried once; when none gives a connection, AllHostsFailedError tells what each did.
   */
  static async connect(options: LockClientOptions = {}): Promise<LockClient> {
    const endpoints = endpointsOf(options, DEFAULT_HOST, DEFAULT_PORT);
    const order = options.hostOrder ?? 'random-start';
    // A caller in plain JavaScript may pass anything; String() prints it whatever it is.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion
    if (!HOST_ORDERS.includes(order)) throw new RangeError(`hostOrder must be ${HOST_ORDERS.join(' or ')}, got ${String(order)}`);
    const start = order === 'as-listed' ? 0 : Math.floor(Math.random() * endpoints.length);
    return LockClient.connectFrom(endpoints, start, options, Infinity);
  }

  /**
   * A new connection with the same options, trying first the host after this one in the list
   * (then on around it, this one last): the next node to ask when this one failed. This
   * connection is left as it is. `withinMs` bounds the whole attempt (each host still gets at
   * most connectTimeoutMs).
   */
  reconnect(withinMs = Infinity): Promise<LockClient> {
    const next = (this.endpointIndex + 1) % this.endpoints.length;
    return LockClient.connectFrom(this.endpoints, next, this.options, performance.now() + withinMs);
  }

  /**
   * A new connection with the same options, to this connection's host first (then on around the
   * list): for a command that holds its connection while it waits (acquire(), awaitLoss()), which
   * needs a connection of its own. This connection is left as it is. `withinMs` bounds the whole
   * attempt (each host still gets at most connectTimeoutMs).
   */
  another(withinMs = Infinity): Promise<LockClient> {
    return LockClient.connectFrom(this.endpoints, this.endpointIndex, this.options, performance.now() + withinMs);
  }

  /** The addresses this client may connect to (one unless connected with `hosts`), in list order. */
  get hosts(): readonly string[] {
    return this.endpoints.map((e) => e.address);
  }

  private static async connectFrom(endpoints: readonly Endpoint[], start: number, options: LockClientOptions, deadline: number): Promise<LockClient> {
    const limitMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const errors: Error[] = [];
    for (let i = 0; i < endpoints.length; i++) {
      const index = (start + i) % endpoints.length;
      const remaining = deadline - performance.now();
      if (remaining <= 0) break;
      try {
        return await LockClient.connectOne(endpoints, index, options, Math.min(limitMs, Math.ceil(remaining)));
      } catch (error) {
        if (endpoints.length === 1 || !(error instanceof LockClientError)) throw error;
        errors.push(error);
      }
    }
    if (errors.length === 0) throw new ConnectTimeoutError(endpoints[start]!.address, 0, 'tcp');
    throw new AllHostsFailedError(errors);
  }

  private static connectOne(endpoints: readonly Endpoint[], index: number, options: LockClientOptions, limitMs: number): Promise<LockClient> {
    const { host, port, address } = endpoints[index]!;
    return new Promise((resolve, reject) => {
      const socket = connectSocket({ host, port, localAddress: options.localAddress });
      socket.setNoDelay(true);
      let settled = false;
      const finish = (outcome: LockClient | Error): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.off('data', onData).off('error', onError).off('close', onClose);
        if (outcome instanceof Error) {
          socket.destroy();
          reject(outcome);
        } else {
          resolve(outcome);
        }
      };
      const onData = (chunk: Buffer): void => {
        if (chunk[0] === GREETING_REFUSED) return finish(new ServerRefusedError(address));
        if (chunk[0] !== GREETING_ACCEPTED) {
          return finish(new ProtocolError(`${address} greeted with 0x${chunk[0]!.toString(16)}, not 0x01 or 0x00`));
        }
        if (chunk.length > 1) return finish(new ProtocolError(`${address} sent bytes after the greeting unasked`));
        finish(new LockClient(socket, endpoints, index, options));
      };
      const onError = (error: Error): void => finish(new ConnectError(address, error));
      const onClose = (): void => finish(new ConnectError(address, new Error('closed before the greeting')));
      const timer = setTimeout(() => finish(new ConnectTimeoutError(address, limitMs, socket.connecting ? 'tcp' : 'greeting')), limitMs);
      socket.on('data', onData).on('error', onError).on('close', onClose);
    });
  }

  /** Whether new requests are accepted (not closed, closing or failed). */
  get isOpen(): boolean {
    return this.open;
  }

  /** Requests awaiting their replies. */
  get inFlight(): number {
    return this.pending.length - this.head;
  }

  /** Find owner (0x01): the owner's bytes; empty when nobody owns the lock. */
  async findOwner(key: LockName, index: LockName): Promise<Buffer> {
    const owner = await this.send({ command: Command.FindOwner, key: this.bytes(key, 'key'), index: this.bytes(index, 'index') });
    return bytesOf(owner);
  }

  /**
   * Request (0x02): joins the queue, or renews the entry if this owner is already in it.
   * Resolves to the position: 1 = owner, 2 = first in line, …, 0 = refused (draining or full).
   */
  request(key: LockName, index: LockName, owner: LockName, options: LockRequestOptions = {}): Promise<number> {
    return this.sendChecked(() => this.lockRequest(Command.Request, key, index, owner, options));
  }

  /**
   * Request with fence (0x0A, an extension of 0.9b): request (0x02) that also answers the fencing
   * token of the grant: `{ position: 1, token }` for the owner (a re-request by the owner renews and
   * keeps its token), `{ position, token: 0 }` otherwise. A server without the extension
   * (LockServer 0.9b) closes the connection instead: FencingUnsupportedError.
   */
  requestFenced(key: LockName, index: LockName, owner: LockName, options: LockRequestOptions = {}): Promise<FencedPosition> {
    return this.sendChecked(() => this.lockRequest(Command.RequestFenced, key, index, owner, options));
  }

  /**
   * Fence (0x09, an extension of 0.9b): the fencing token of `owner`'s current grant of the lock,
   * or 0 when it does not own it (waiting, or no entry). Tokens only grow from one grant of a
   * (key, index) to the next; renewals keep them. A server without the extension closes the
   * connection instead: FencingUnsupportedError.
   */
  fence(key: LockName, index: LockName, owner: LockName): Promise<number> {
    return this.sendChecked(() => ({ command: Command.Fence, ...this.triple(key, index, owner) }));
  }

  /**
   * Acquire and wait (0x0B, an extension of 0.9b): request with fence (0x0A) that waits for the
   * lock up to `waitMs` (no bound by default). Resolves to `{ position: 1, token }` once `owner`
   * owns the lock (at once if it is free); `{ position: 0, token: 0 }` if the server refused the
   * entry (draining, table full) or the entry ended while it waited (its TTW ran out, someone's
   * release-all or release with `*`); `{ position: N ≥ 2, token: 0 }` when the bound passed — the
   * entry stays queued, to be waited on again or released.
   *
   * A wait holds the connection, as a Redis blocking command does: the server runs the requests
   * issued after it only once it is answered, and their requestTimeoutMs counts from then. Its
   * own reply may take waitMs + requestTimeoutMs (no limit without a bound). Closing the
   * connection (close() or destroy()) ends the wait and the server removes the waiting entry; so
   * wait on a connection of its own (another()). A grant after a wait starts its TTL somewhere
   * between the send and the reply: renew (0x04) at once and count the TTL from that renewal's
   * send. A server without the extension (LockServer 0.9b, or a lockserver before it) closes the
   * connection instead: ExtensionUnsupportedError.
   */
  acquire(key: LockName, index: LockName, owner: LockName, options: AcquireOptions = {}): Promise<FencedPosition> {
    return this.sendChecked(() => ({ ...this.lockRequest(Command.AcquireWait, key, index, owner, options), waitMs: waitBound(options.waitMs) }));
  }

  /**
   * The loss notice (0x0C, an extension of 0.9b): resolves, with a LossReason, when `owner`'s grant
   * of the lock ends — Released (0x05 by name), ReleasedKey (0x05 with index `*`), ReleasedAll
   * (0x06), Expired (its TTL ran out) — or at once with NotOwner when it does not own the lock.
   * It holds the connection like acquire() and has no reply limit. A server without the extension
   * closes the connection instead: ExtensionUnsupportedError.
   */
  awaitLoss(key: LockName, index: LockName, owner: LockName): Promise<LossReason> {
    return this.sendChecked(() => ({ command: Command.AwaitLoss, ...this.triple(key, index, owner) })) as Promise<LossReason>;
  }

  /** Find contender location (0x03): the position, or 0 when the owner is not queued. */
  location(key: LockName, index: LockName, owner: LockName): Promise<number> {
    return this.sendChecked(() => ({ command: Command.FindLocation, ...this.triple(key, index, owner) }));
  }

  /** Renew (0x04): true when the entry (owner or waiter) existed and its timer restarted. */
  renew(key: LockName, index: LockName, owner: LockName): Promise<boolean> {
    return this.sendChecked(() => ({ command: Command.Renew, ...this.triple(key, index, owner) }));
  }

  /** Release (0x05): entries removed. Index `*` removes the owner's entries under the key, across indexes. */
  release(key: LockName, index: LockName, owner: LockName): Promise<number> {
    return this.sendChecked(() => ({ command: Command.Release, ...this.triple(key, index, owner) }));
  }

  /** Release all (0x06): every entry of the owner, under any key. */
  releaseAll(owner: LockName): Promise<number> {
    return this.sendChecked(() => ({ command: Command.ReleaseAll, owner: this.bytes(owner, 'owner') }));
  }

  /** List contenders (0x07): every entry under the key, each index's queue in order. */
  async list(key: LockName): Promise<ListedEntry[]> {
    const contenders = await this.send({ command: Command.List, key: this.bytes(key, 'key') });
    const positions = positionsOf(contenders);
    return contenders.map((c, i) => listedEntry(c, positions[i]!));
  }

  /**
   * The detailed list (0x0D, an extension of 0.9b): every (key, index) queue under the key, in the
   * order list() gives them, with its lock-delay left (`heldForMs`; a lock held back after its
   * owner's TTL ran out may have no entries at all), and each entry with its time left and token.
   * A server without the extension closes the connection instead: ExtensionUnsupportedError (then
   * list() through a new connection tells what 0.9b can).
   */
  async queues(key: LockName): Promise<DetailedQueue[]> {
    const views = await this.send({ command: Command.ListDetailed, key: this.bytes(key, 'key') });
    return views.map((q) => {
      const positions = positionsOf(q.entries);
      return { index: bytesOf(q.index), heldForMs: q.heldForMs, entries: q.entries.map((e, i) => detailedEntry(e, positions[i]!)) };
    });
  }

  /** Retrieve stats (0x08). */
  stats(): Promise<StatsReply> {
    return this.send({ command: Command.Stats });
  }

  /**
   * Sends a request given in the codec's own terms (byte strings) and resolves to the codec's
   * decoded reply. For tools and benchmarks; the typed methods above are easier to use.
   */
  call<R extends Request>(request: R): Promise<ReplyOf[R['command']]> {
    return this.sendChecked(() => (checkRequest(request), request));
  }

  /**
   * Half-closes the connection: requests already issued are still answered, then the server
   * closes and this resolves. New requests are rejected from now on. A wait outstanding
   * (acquire(), awaitLoss()) is ended by the server instead, unanswered: it rejects with
   * ConnectionClosedError.
   */
  async close(): Promise<void> {
    if (this.open) {
      this.open = false;
      this.halfClosed = true;
      this.flush();
      this.socket.end();
      const limitMs = this.requestTimeoutMs > 0 ? this.requestTimeoutMs : DEFAULT_REQUEST_TIMEOUT_MS;
      const limit = setTimeout(() => this.socket.destroy(), limitMs);
      limit.unref();
      void this.closed.then(() => clearTimeout(limit));
    }
    await this.closed;
  }

  /** Closes at once; requests awaiting replies are rejected with ConnectionClosedError. */
  destroy(): void {
    this.fail(new ConnectionClosedError(`connection to ${this.address} closed by the client`));
  }

  private bytes(name: LockName, what: string): ByteString {
    return toByteString(name, what, this.encoding);
  }

  private triple(key: LockName, index: LockName, owner: LockName) {
    return { key: this.bytes(key, 'key'), index: this.bytes(index, 'index'), owner: this.bytes(owner, 'owner') };
  }

  private lockRequest<C extends typeof Command.Request | typeof Command.RequestFenced | typeof Command.AcquireWait>(
    command: C,
    key: LockName,
    index: LockName,
    owner: LockName,
    options: LockRequestOptions,
  ) {
    return {
      command,
      key: this.bytes(key, 'key'),
      index: this.bytes(index, 'index'),
      owner: this.bytes(owner, 'owner'),
      ttl: checkInteger('ttl', options.ttl ?? DEFAULT_TTL_SECONDS, MAX_U16),
      ttw: checkInteger('ttw', options.ttw ?? DEFAULT_TTW_SECONDS, MAX_U16),
      priority: checkInteger('priority', options.priority ?? DEFAULT_PRIORITY, MAX_PRIORITY),
    };
  }

  /** Builds the request (whose checks may throw) and sends it; a failed check becomes a rejection. */
  private sendChecked<R extends Request>(build: () => R): Promise<ReplyOf[R['command']]> {
    let request: R;
    try {
      request = build();
    } catch (error) {
      return Promise.reject(error);
    }
    return this.send(request);
  }

  private send<R extends Request>(request: R): Promise<ReplyOf[R['command']]> {
    if (!this.open) return Promise.reject(new ConnectionClosedError(`connection to ${this.address} is closed`));
    if (this.inFlight >= this.maxInFlight) {
      return Promise.reject(new LockClientError(`${this.maxInFlight} requests already await replies (maxInFlight)`));
    }
    encodeRequest(this.writer, request);
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => this.flush());
    }
    return new Promise((resolve, reject) => {
      this.pending.push({ command: request.command, sentAt: performance.now(), limitMs: this.limitOf(request), resolve, reject });
      if (this.inFlight === 1) this.watchOldest();
    });
  }

  /** How long the reply to `request` may take: requestTimeoutMs, and for a bounded wait its bound too; a wait without a bound has none. */
  private limitOf(request: Request): number {
    if (this.requestTimeoutMs <= 0) return Infinity;
    if (request.command === Command.AwaitLoss) return Infinity;
    if (request.command === Command.AcquireWait) return request.waitMs === NO_WAIT_BOUND ? Infinity : request.waitMs + this.requestTimeoutMs;
    return this.requestTimeoutMs;
  }

  /**
   * When the reply to `pending` is late. Replies come in order, so a request issued behind a wait
   * was held by the server until that wait was answered: its time counts from then. Called only
   * for the oldest request, when every wait before it has been answered.
   */
  private deadlineOf(pending: PendingReply): number {
    return Math.max(pending.sentAt, this.waitAnsweredAt) + pending.limitMs;
  }

  private flush(): void {
    this.flushQueued = false;
    if (this.writer.length === 0 || this.socket.destroyed) return;
    this.socket.write(this.writer.flush());
  }

  /**
   * One timer watches the oldest request only: replies come in order, so it is always the first
   * to be late. When it fires early (that request was answered), it re-arms for the new oldest.
   * It is set anew only when the oldest is due sooner than the timer (after a wait, whose bound
   * is longer than the requests behind it), so a stream of plain requests costs no timer churn.
   */
  private watchOldest(): void {
    const oldest = this.pending[this.head];
    const deadline = oldest === undefined ? Infinity : this.deadlineOf(oldest);
    if (deadline >= this.timerDeadline || deadline === Infinity) return;
    clearTimeout(this.timer);
    this.timerDeadline = deadline;
    this.timer = setTimeout(() => this.checkDeadline(), Math.max(0, deadline - performance.now()));
    this.timer.unref();
  }

  private checkDeadline(): void {
    this.timer = undefined;
    this.timerDeadline = Infinity;
    const oldest = this.pending[this.head];
    if (oldest === undefined) return;
    if (performance.now() < this.deadlineOf(oldest)) {
      this.watchOldest();
      return;
    }
    const name = COMMAND_NAMES[oldest.command] ?? 'request';
    this.fail(new ConnectionClosedError(`connection to ${this.address} closed: an earlier reply timed out`), new RequestTimeoutError(name, oldest.limitMs));
  }

  private onData(chunk: Buffer): void {
    this.decoder.push(chunk);
    while (this.head < this.pending.length) {
      const waiting = this.pending[this.head]!;
      let reply: ReplyOf[Command] | typeof NOT_YET;
      try {
        reply = this.decoder.next(waiting.command);
      } catch (error) {
        this.fail(new ProtocolError(`${this.address} sent a reply that cannot be read: ${(error as Error).message}`, { cause: error }));
        return;
      }
      if (reply === NOT_YET) break;
      this.pending[this.head++] = undefined;
      if (isWait(waiting.command)) this.waitAnsweredAt = performance.now();
      waiting.resolve(reply as never);
    }
    this.watchOldest();
    if (this.head === this.pending.length) {
      this.pending.length = 0;
      this.head = 0;
      if (this.decoder.pendingBytes > 0) this.fail(new ProtocolError(`${this.address} sent bytes nobody asked for`));
    } else if (this.head > 1024 && this.head * 2 > this.pending.length) {
      this.pending.splice(0, this.head);
      this.head = 0;
    }
  }

  /**
   * The connection ended from the server's side or the network's. A server without an extension
   * closes it on the extension's command without a reply, so an extension request that was next
   * to be answered is rejected with FencingUnsupportedError (0x09, 0x0A) or
   * ExtensionUnsupportedError (0x0B, 0x0C, 0x0D) — unless we had half-closed the connection
   * meanwhile, which is what ended a wait.
   */
  private peerClosed(error: ConnectionClosedError): void {
    const oldest = this.pending[this.head]?.command;
    if (oldest === undefined) {
      this.fail(error);
    } else if (FENCING_COMMANDS.has(oldest)) {
      this.fail(error, new FencingUnsupportedError(this.address, COMMAND_NAMES[oldest]!, error));
    } else if (OTHER_EXTENSION_COMMANDS.has(oldest) && !(this.halfClosed && isWait(oldest))) {
      this.fail(error, new ExtensionUnsupportedError(this.address, COMMAND_NAMES[oldest]!, error));
    } else {
      this.fail(error);
    }
  }

  /** Ends the connection and rejects every request awaiting a reply (the oldest with `oldestError`, if given). */
  private fail(error: Error, oldestError: Error = error): void {
    this.open = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerDeadline = Infinity;
    const waiting = this.pending.slice(this.head);
    this.pending.length = 0;
    this.head = 0;
    this.socket.destroy();
    waiting.forEach((request, i) => request!.reject(i === 0 ? oldestError : error));
  }
}
