import type { Socket } from 'node:net';
import { printable } from '../bytes.js';
import { Later, Waiting, type LaterListener } from '../locks/Later.js';
import type { Answer, LockCounts, LockService } from '../locks/LockService.js';
import { BufferWriter } from '../protocol/BufferWriter.js';
import { ANY_INDEX, Command, COMMAND_NAMES, MAX_U16, NO_WAIT_BOUND, PEER_LINK_BYTE } from '../protocol/constants.js';
import { RequestDecoder, UnknownCommandError } from '../protocol/decodeRequest.js';
import {
  encodeCountReply,
  encodeFencedPositionReply,
  encodeListReply,
  encodeLossReply,
  encodeOwnerReply,
  encodeQueuesReply,
  encodePositionReply,
  encodeStatsReply,
  encodeSuccessReply,
  encodeTokenReply,
} from '../protocol/encodeReply.js';
import type { Request } from '../protocol/messages.js';
import type { StatsReply } from '../protocol/messages.js';
import type { Logger } from '../runtime/Logger.js';
import { InputStamps } from './InputStamps.js';

/** Unparsed input held per connection before we stop reading from its socket. */
const MAX_PENDING_INPUT = 64 * 1024;
/** Replies gathered before they are handed to the socket mid-batch. */
const FLUSH_THRESHOLD = 16 * 1024;
const REPLY_BUFFER_INITIAL = 256;
const REPLY_BUFFER_RETAINED = 64 * 1024;
/**
 * Most answers one connection may have outstanding (submitted to a service that answers later,
 * reply not yet written). At the limit it stops decoding, and so, once MAX_PENDING_INPUT has
 * arrived, stops reading: a client cannot make us hold more than this many answers for it. 1024
 * is far above what one connection needs to fill a group commit (a batch gathers what every
 * connection sent during one ~2–5 ms append) and small enough that the held answers stay cheap.
 */
export const MAX_OUTSTANDING_ANSWERS = 1024;
/**
 * Most commands one connection runs in one turn of the event loop; then it yields (setImmediate)
 * so other connections, timers and accepts get their turn, as Redis reads one bounded chunk per
 * client per loop. About a millisecond of work for the local table; a pipelined client keeping 16
 * requests in flight never reaches it, so it costs those no throughput.
 */
export const MAX_COMMANDS_PER_TURN = 1024;
/**
 * Most reply bytes one connection produces in one turn (Redis writes at most 64 KiB per client
 * per event). One reply may be longer (a long list); the connection then yields after it.
 */
export const MAX_REPLY_BYTES_PER_TURN = 64 * 1024;

/** Where a pending reply stands. */
const WAITING = 0;
const ANSWERED = 1;
const FAILED = 2;

type Encode<T> = (out: BufferWriter, value: T) => void;

/**
 * A reply whose answer comes later, or one answered at once behind such a reply: replies leave in
 * request order, so an answer that settles early waits for the ones before it. Only services that
 * answer later ever make these; the local table's answers are encoded straight away.
 */
class PendingReply {
  state = WAITING;
  value: unknown = undefined;
  error: unknown = undefined;
  /** A wait the client is in (0x0B, 0x0C), cancelled if the connection closes before it is answered. */
  waiting: Waiting<unknown> | undefined = undefined;

  constructor(
    readonly command: number,
    readonly encode: Encode<never>,
    /** When the command was submitted, if its time is being observed. */
    readonly submittedAt: number | undefined,
  ) {}
}

/** A table by command byte, true for `commands`: looked up per command without hashing. */
function byCommandByte(commands: readonly Command[]): readonly boolean[] {
  const table = new Array<boolean>(256).fill(false);
  for (const command of commands) table[command] = true;
  return table;
}

/**
 * Commands whose reply holds the decoding of the commands behind it until it is written: a list
 * (0x07, 0x0D), which can be tens of megabytes, so a connection holds at most one list's answer at
 * a time; and a wait (0x0B, 0x0C), whose later replies wait behind it as a Redis blocking
 * command's do, and whose later commands, as there, run only after it is answered.
 */
const HOLDS_DECODING = byCommandByte([Command.List, Command.ListDetailed, Command.AcquireWait, Command.AwaitLoss]);

/** Told how long each command took (metrics); absent unless someone asked. */
export interface CommandObserver {
  commandDone(command: number, elapsedMs: number): void;
}

/** What a connection needs from the server around it. */
export interface ConnectionHost {
  readonly service: LockService;
  readonly logger: Logger;
  readonly draining: boolean;
  /** Undefined unless metrics are on, so commands are not timed for nobody. */
  readonly commandObserver: CommandObserver | undefined;
  /** Counts a command (before it runs, so a stats request counts itself). */
  countCommand(command: number): void;
  statsSnapshot(locks: LockCounts): StatsReply;
  /** Called after anything that may have emptied the table (drain mode watches for that). */
  afterRemoval(): void;
  now(): number;
  /**
   * Cluster mode: how old (ms) the input of a mutating command may be when it is decoded (see
   * LockServerOptions.staleInputMs); undefined on a single node, which judges no input stale.
   */
  readonly staleInputMs: number | undefined;
  /**
   * Whether bytes read now may have waited in the socket while this process stood still (a
   * stall of the event loop longer than the server allows: see LockServer's staleInputMs).
   */
  inputIsStale(): boolean;
  /** Stalls of the event loop seen so far: one seen while a connection's input was paused makes what waits behind it stale. */
  readonly stallsSeen: number;
  /** Told once for each connection whose stale input was refused (or that was refused at accept for it). */
  staleInputRefused(peer: string): void;
  onPartialFrame(connection: Connection): void;
  onClosed(connection: Connection): void;
  /** Cluster mode: takes over a connection that opened with PEER_LINK_BYTE (see LockServerOptions.adoptLink). */
  readonly adoptLink: ((socket: Socket, buffered: Buffer) => void) | undefined;
  /** The connection was handed over (adoptLink): it is no longer this server's. */
  handedOff(connection: Connection): void;
  /**
   * The bytes this connection's socket holds unwritten changed by `delta` (replies its client has
   * not read yet): the server bounds their sum over every connection (see LockServer).
   */
  outputBuffered(connection: Connection, delta: number): void;
}

/**
 * Where a connection is in its life. Each phase allows no more than the one before it, and the
 * phase only moves forward (advance() ignores a step back), so a step that makes no sense, such
 * as a shutdown's quiesce() on a connection that has already failed, is a no-op by construction.
 *
 *   Reading   → Quiescing  quiesce(): shutdown
 *   Reading   → Halted     fail(): undecodable input, a command that threw, input that waited
 *                          too long (cluster mode: refuseStaleInput)
 *   Quiescing → Halted     fail(): the same, in input received before quiesce()
 *   any above → Closing    hangUp(): a failure's turn in line came, or the frame timeout;
 *                          end(): shutdown; drop(): idle timeout; or caught up after the
 *                          client half-closed
 *   any above → Closed     the socket's 'close' (also without Closing: a reset)
 */
const enum Phase {
  /** Taking input, decoding it and answering it in order. */
  Reading,
  /**
   * Shutting down: no more input is taken, but what was received is still decoded and answered,
   * so quiesce() can tell when that is done.
   */
  Quiescing,
  /**
   * Undecodable input, a failed command or input that waited too long: nothing more is taken or
   * decoded; the replies before the failure are still written, then the connection hangs up (a
   * failed entry waits its turn).
   */
  Halted,
  /**
   * Hung up, dropped, ended at shutdown, or caught up after the client half-closed: nothing
   * more is taken or decoded, answers still to come are dropped; what was already handed to the
   * socket still goes out, and the socket is closing.
   */
  Closing,
  /** The socket has closed: nothing more can be written; the server has been told. */
  Closed,
}

/** Stands for "not a command" where one is named (a failure before any command was read). */
const NO_COMMAND = 0;
const NO_LOCKS: LockCounts = { owners: 0, waiters: 0 };

/** Input refused because it may have waited too long (see Connection.waitedTooLong); logged by the host. */
class StaleInputError extends Error {
  override name = 'StaleInputError';

  constructor() {
    super('input that may have waited too long to run');
  }
}

/** The client closed its side, or the server is shutting down, while a wait was outstanding (see Connection.endWaits). */
class WaitEndedError extends Error {
  override name = 'WaitEndedError';

  constructor() {
    super('a wait that ended unanswered (the client closed its side, or the server is going down)');
  }
}
const WAIT_ENDED = new WaitEndedError();

/** Commands that change the table, by command byte: only these are refused for their age. */
const MUTATING = byCommandByte([Command.Request, Command.RequestFenced, Command.AcquireWait, Command.Renew, Command.Release, Command.ReleaseAll]);

/**
 * One accepted client: decodes its byte stream, submits each request to the lock service in
 * order, and writes the replies in the same order.
 *
 * Answers given at once (the local table) are encoded at once. Answers that come later (a
 * replicated core) do not hold up the requests behind them: those are submitted immediately, so
 * the service can batch them, and their replies wait in a FIFO until every reply before them is
 * written. A rejected answer closes the connection after the replies before it.
 *
 * Bounds: at most MAX_OUTSTANDING_ANSWERS answers outstanding; when the client stops reading, we
 * stop reading from it (backpressure); neither side can make us buffer without bound.
 */
/** The last connection number handed out: each connection's is the next, so no two of a process's share one. */
let lastConnectionNumber = 0;

export class Connection {
  /**
   * This connection's number, which its requests give the lock service (`client`): the entries
   * created through one connection are capped (--max-locks-per-connection).
   */
  readonly number = ++lastConnectionNumber;
  private readonly decoder = new RequestDecoder();
  private readonly replies = new BufferWriter(REPLY_BUFFER_INITIAL, REPLY_BUFFER_RETAINED);
  /** Replies not yet written because an answer (theirs or an earlier one) is outstanding. */
  private pending: Array<PendingReply | undefined> = [];
  private pendingHead = 0;
  /** When the command being submitted started (only kept while metrics observe commands). */
  private submittedAt = 0;
  /** The connection's life; changed only by advance(). */
  private phase = Phase.Reading;
  // What follows is not the connection's life but the work in hand and the socket's flow, which
  // vary within a phase: the phase decides what may happen, these what is happening right now.
  /** Inside pump(): a pump asked for meanwhile (an answer, a drain) is covered by this one. */
  private pumping = false;
  /** A pump waits for the next turn of the event loop after this one's share (MAX_*_PER_TURN). */
  private nextTurnScheduled = false;
  /** A pump waits for the answers settling now (deliverSoon). */
  private deliveryScheduled = false;
  /** Reply bytes handed to the socket so far; the turn's share is measured against it. */
  private bytesOut = 0;
  private turnStartBytes = 0;
  /** The socket refused a write: nothing more is written or read until it drains. */
  private writeBlocked = false;
  /** We asked the socket to stop reading (backpressure, or a phase that takes no input). */
  private inputPaused = false;
  /** The host's stallsSeen when input was last paused (resumeInput). */
  private stallsWhenPaused = 0;
  /** When input was last paused (resumeInput). */
  private pausedAt = 0;
  /** Cluster mode: when and after how many stalls each piece of undecoded input was read. */
  private readonly stamps: InputStamps | undefined;
  /**
   * Cluster mode: reading was once paused for longer than the host's staleInputMs. Whatever is
   * read after that may have waited in the socket (ours or the client's) all along, for all we can
   * tell, so this connection runs no mutating command any more: the first one halts it.
   */
  private writesStale = false;
  /** Bytes read so far (only the first one matters: a link from another node says so there). */
  private bytesIn = 0;
  /** When the command being run was read (cluster mode: its commit deadline counts from here). */
  private receivedAt: number | undefined;
  /** When the last reply that held decoding (a wait, a list) was delivered and decoding went on. */
  private decodingResumedAt = Number.NEGATIVE_INFINITY;
  /** Replies of commands that hold decoding (HOLDS_DECODING) asked for and not encoded yet: nothing is decoded while there is one. */
  private holdingDecoding = 0;
  /**
   * The client half-closed. A fact about the peer, not a phase of ours: reading or quiescing, we
   * answer what it sent and, once caught up, close our side too.
   */
  private peerEnded = false;
  /** True once every whole request received has been submitted and answered. */
  private caughtUp = true;
  private onQuiet: (() => void) | undefined;
  /** Bytes came in or went out since housekeeping last looked (see idleFor). */
  private stirred = false;
  private quietSince: number;
  /** When the current incomplete frame began to arrive; undefined when none is pending. */
  partialSince: number | undefined;

  constructor(
    readonly socket: Socket,
    readonly peer: string,
    private readonly host: ConnectionHost,
  ) {
    this.quietSince = host.now();
    if (host.staleInputMs !== undefined) this.stamps = new InputStamps();
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => {
      this.peerEnded = true;
      this.endWaits(true);
      this.pump();
    });
    socket.on('error', (error) => this.host.logger.debug?.(`${this.peer} went away badly: ${error.message}`));
    socket.on('close', () => {
      if (this.advance(Phase.Closed)) {
        this.reportBuffered();
        this.host.onClosed(this);
      }
    });
  }

  /**
   * A link from another cluster node (it sent PEER_LINK_BYTE first): the socket is no longer a
   * lock client's. Nothing was decoded or answered; the link's owner takes it as it is.
   */
  private handOff(adopt: (socket: Socket, buffered: Buffer) => void, buffered: Buffer): void {
    for (const event of ['data', 'end', 'error', 'close']) this.socket.removeAllListeners(event);
    this.advance(Phase.Closed);
    this.host.handedOff(this);
    adopt(this.socket, buffered);
  }

  /** Answers submitted whose replies are not written yet. */
  get outstanding(): number {
    return this.pending.length - this.pendingHead;
  }

  /**
   * The one place the phase changes; returns whether it did. Only forward: a step to the current
   * or an earlier phase does nothing. Entering a phase that takes no input pauses the socket;
   * entering Closing or Closed (whichever comes first) drops the answers still to come and
   * releases a waiting quiesce().
   */
  private advance(to: Phase): boolean {
    const from = this.phase;
    if (to <= from) return false;
    this.phase = to;
    if (from >= Phase.Closing) return true;
    if (to < Phase.Closing) {
      this.pauseInput();
    } else {
      // A client that waited in 0x0B or 0x0C no longer does: its waiting entry goes (see LockService.acquire).
      for (let i = this.pendingHead; i < this.pending.length; i++) this.pending[i]?.waiting?.cancel();
      this.pending = [];
      this.pendingHead = 0;
      this.notifyQuiet();
    }
    return true;
  }

  private onData(chunk: Buffer): void {
    if (this.phase !== Phase.Reading) return;
    if (this.bytesIn === 0 && chunk[0] === PEER_LINK_BYTE && this.host.adoptLink !== undefined) {
      this.handOff(this.host.adoptLink, chunk.subarray(1));
      return;
    }
    this.bytesIn += chunk.length;
    if (this.host.inputIsStale()) {
      this.refuseStaleInput();
      return;
    }
    this.stirred = true;
    this.stamps?.add(chunk.length, this.host.now(), this.host.stallsSeen);
    this.decoder.push(chunk);
    if (this.decoder.pendingBytes > MAX_PENDING_INPUT) this.pauseInput();
    this.pump();
  }

  private pauseInput(): void {
    if (this.inputPaused) return;
    this.inputPaused = true;
    // Paused in the turn a stall is seen: the stall is counted already, yet the socket may hold
    // (or Node may have read into its buffer) bytes that waited through it; no count matches -1.
    this.stallsWhenPaused = this.host.inputIsStale() ? -1 : this.host.stallsSeen;
    this.pausedAt = this.host.now();
    this.socket.pause();
  }

  /** Reading again after backpressure; only while the phase still takes input. */
  private resumeInput(): void {
    if (!this.inputPaused || this.phase !== Phase.Reading) return;
    // Bytes left in the socket while reading was paused may have waited there through a stall
    // (input read at once after a stall is caught in onData; these are read turns later).
    if (this.host.inputIsStale() || this.host.stallsSeen !== this.stallsWhenPaused) {
      this.refuseStaleInput();
      return;
    }
    const limit = this.host.staleInputMs;
    if (limit !== undefined && this.host.now() - this.pausedAt > limit) this.writesStale = true;
    this.inputPaused = false;
    this.socket.resume();
  }

  /**
   * Writes the replies whose turn has come, then decodes and submits requests until the input
   * runs out, the socket stops taking writes, or MAX_OUTSTANDING_ANSWERS are outstanding.
   */
  private pump(): void {
    if (this.pumping || this.nextTurnScheduled || this.phase >= Phase.Closing) return;
    this.pumping = true;
    this.turnStartBytes = this.bytesOut;
    let submitted = 0;
    let waitingForBytes = false;
    try {
      if (this.outstanding > 0) this.deliver();
      while (
        !this.writeBlocked &&
        !this.nextTurnScheduled &&
        this.phase < Phase.Halted &&
        this.outstanding < MAX_OUTSTANDING_ANSWERS &&
        this.holdingDecoding === 0
      ) {
        if (submitted === MAX_COMMANDS_PER_TURN || this.turnBytes >= MAX_REPLY_BYTES_PER_TURN) {
          if (this.decoder.pendingBytes === 0) {
            waitingForBytes = true;
          } else {
            this.yieldTurn();
          }
          break;
        }
        const pending = this.decoder.pendingBytes;
        const request = this.decoder.next();
        if (request === undefined) {
          waitingForBytes = true;
          break;
        }
        if (this.stamps !== undefined && this.waitedTooLong(request, pending)) {
          this.refuseStaleInput();
          break;
        }
        submitted++;
        const observer = this.host.commandObserver;
        if (observer === undefined) {
          this.execute(request);
        } else {
          const started = (this.submittedAt = this.host.now());
          if (this.execute(request)) observer.commandDone(request.command, this.host.now() - started);
        }
        if (this.replies.length >= FLUSH_THRESHOLD) this.flush();
      }
    } catch (error) {
      this.fail(error);
    }
    this.pumping = false;
    this.flush();
    this.settle(waitingForBytes, submitted);
  }

  /** Reply bytes produced in this turn, written or not. */
  private get turnBytes(): number {
    return this.bytesOut - this.turnStartBytes + this.replies.length;
  }

  /**
   * Cluster mode: whether `request` (whose first byte was `pending` bytes before the end of what was
   * read) must not run because its bytes may have waited too long: through a stall of this process
   * (any command), or, for a command that changes the table, longer than staleInputMs since they
   * were read (a deep pipeline waiting behind slow answers), or after reading was paused that long.
   * A read that runs late answers from the table as it is then, which is harmless. Sets receivedAt.
   */
  private waitedTooLong(request: Request, pending: number): boolean {
    const stamps = this.stamps!;
    if (!stamps.seek(pending)) return false;
    // A command held behind a wait (or a list) gets its commit deadline from when decoding went on,
    // not from when it was read: the client put it there. Its age for the check below stays its own.
    this.receivedAt = Math.max(stamps.readTime, this.decodingResumedAt);
    if (stamps.stallCount !== this.host.stallsSeen) return true;
    if (!MUTATING[request.command]) return false;
    return this.writesStale || this.host.now() - stamps.readTime > this.host.staleInputMs!;
  }

  private yieldTurn(): void {
    if (this.nextTurnScheduled) return;
    this.nextTurnScheduled = true;
    setImmediate(this.nextTurn);
  }

  private readonly nextTurn = (): void => {
    this.nextTurnScheduled = false;
    this.pump();
  };

  /** After a pump: reading again, the end of a half-closed connection, the frame timer. */
  private settle(waitingForBytes: boolean, submitted: number): void {
    if (this.phase >= Phase.Closing) return;
    this.caughtUp = waitingForBytes && this.outstanding === 0 && !this.writeBlocked;
    if (this.caughtUp && this.peerEnded) {
      // Half-closed by the client: every reply has been written; now close our side too.
      this.socket.end();
      this.advance(Phase.Closing);
      return;
    }
    if (this.caughtUp && this.phase === Phase.Quiescing) this.notifyQuiet();
    if (!this.writeBlocked && this.decoder.pendingBytes <= MAX_PENDING_INPUT) this.resumeInput();
    if (waitingForBytes && this.decoder.pendingBytes > 0 && !this.inputPaused) {
      // An incomplete frame waits for bytes we are reading: that, and only that, is timed. Not
      // while replies back up (we are not reading then) nor while whole requests wait their turn.
      if (submitted > 0 || this.partialSince === undefined) {
        this.partialSince = this.host.now();
        this.host.onPartialFrame(this);
      }
    } else {
      this.partialSince = undefined;
    }
  }

  private flush(): void {
    if (this.replies.length === 0 || this.phase === Phase.Closed) return;
    this.bytesOut += this.replies.length;
    this.stirred = true;
    const taken = this.socket.write(this.replies.flush());
    this.reportBuffered();
    if (taken || this.writeBlocked) return;
    this.writeBlocked = true;
    this.pauseInput();
    this.socket.once('drain', this.onDrain);
  }

  /** Bytes the socket holds unwritten, as last told to the host. */
  private bufferedOut = 0;

  /** Tells the host how much of this connection's output waits in its socket now (unread replies). */
  private reportBuffered(): void {
    // A connection closing or closed holds nothing more for the count: dropped, its buffers go with its socket.
    const now = this.phase >= Phase.Closing ? 0 : (this.socket.writableLength ?? 0);
    if (now === this.bufferedOut) return;
    const delta = now - this.bufferedOut;
    this.bufferedOut = now;
    this.host.outputBuffered(this, delta);
  }

  /** Replies written to the socket that its client has not taken yet, in bytes (as last seen). */
  get unreadOutput(): number {
    return this.bufferedOut;
  }

  private readonly onDrain = (): void => {
    this.reportBuffered();
    this.writeBlocked = false;
    this.stirred = true;
    this.pump();
  };

  /**
   * Runs one request. Returns true when its answer is known now (the local table always), false
   * when it comes later; the reply is encoded at once when nothing before it is outstanding, else
   * queued behind the outstanding ones. No promise or closure is made for an answer given at once.
   */
  private execute(request: Request): boolean {
    const { service, logger } = this.host;
    const at = this.receivedAt;
    this.host.countCommand(request.command);
    logger.debug?.(`${this.peer} asks ${COMMAND_NAMES[request.command]} ${describe(request)}`);
    switch (request.command) {
      case Command.FindOwner:
        return this.reply(request.command, service.findOwner(request.key, request.index, at), encodeOwnerReply);
      case Command.Request:
        return this.reply(request.command, service.request(request, !this.host.draining, at, this.number), encodePositionReply);
      case Command.FindLocation:
        return this.reply(request.command, service.location(request.key, request.index, request.owner, at), encodePositionReply);
      case Command.Renew:
        return this.reply(request.command, service.renew(request.key, request.index, request.owner, at), encodeSuccessReply);
      case Command.Release:
        return this.reply(
          request.command,
          request.index === ANY_INDEX ? service.releaseKey(request.key, request.owner, at) : service.release(request.key, request.index, request.owner, at),
          this.encodeRemoved,
        );
      case Command.ReleaseAll:
        return this.reply(request.command, service.releaseAll(request.owner, at), this.encodeRemoved);
      case Command.List:
        return this.reply(request.command, service.list(request.key, MAX_U16, at), encodeListReply);
      case Command.ListDetailed:
        return this.reply(request.command, service.queues(request.key, MAX_U16, at), encodeQueuesReply);
      case Command.AcquireWait:
        return this.reply(request.command, service.acquire(request, !this.host.draining, request.waitMs, at, this.number), encodeFencedPositionReply);
      case Command.AwaitLoss:
        return this.reply(request.command, service.awaitLoss(request.key, request.index, request.owner, at), encodeLossReply);
      case Command.Fence:
        return this.reply(request.command, service.fence(request.key, request.index, request.owner, at), encodeTokenReply);
      case Command.RequestFenced:
        return this.reply(request.command, service.requestFenced(request, !this.host.draining, at, this.number), encodeFencedPositionReply);
      case Command.Stats: {
        // The counters as of now (this request counted, later ones not); the lock gauges once known.
        const stats = this.host.statsSnapshot(NO_LOCKS);
        return this.reply(request.command, service.counts(), (out, locks) =>
          encodeStatsReply(out, { ...stats, owners: locks.owners, contenders: locks.waiters }),
        );
      }
    }
  }

  /** Encodes an answer given at once with nothing outstanding before it; otherwise queues its reply. */
  private reply<T>(command: number, answer: Answer<T>, encode: Encode<T>): boolean {
    const now = !(answer instanceof Later) && !(answer instanceof Promise);
    if (now && this.outstanding === 0) {
      encode(this.replies, answer);
      return true;
    }
    const pending = new PendingReply(command, encode, this.host.commandObserver === undefined ? undefined : this.submittedAt);
    this.pending.push(pending);
    // Counted however it is answered, as deliver() counts it out when it encodes it.
    if (HOLDS_DECODING[command]) this.holdingDecoding++;
    if (answer instanceof Waiting) pending.waiting = answer;
    if (answer instanceof Later) {
      answer.listen(this.settlements, pending);
    } else if (answer instanceof Promise) {
      answer.then(
        (value) => this.answered(pending, value),
        (error: unknown) => this.rejected(pending, error),
      );
    } else {
      pending.state = ANSWERED;
      pending.value = answer;
    }
    return now;
  }

  /** Hears every Later answer of this connection, each with its pending reply (one object per connection, not per command). */
  private readonly settlements: LaterListener<unknown, PendingReply> = {
    resolved: (pending, value) => this.answered(pending, value),
    rejected: (pending, error) => this.rejected(pending, error),
  };

  private answered(pending: PendingReply, value: unknown): void {
    if (this.phase >= Phase.Closing) return;
    pending.state = ANSWERED;
    pending.value = value;
    const observer = this.host.commandObserver;
    if (observer !== undefined && pending.submittedAt !== undefined) {
      observer.commandDone(pending.command, this.host.now() - pending.submittedAt);
    }
    this.deliverSoon(pending);
  }

  private rejected(pending: PendingReply, error: unknown): void {
    if (this.phase >= Phase.Closing) return;
    pending.state = FAILED;
    pending.error = error;
    this.deliverSoon(pending);
  }

  /**
   * A pump once the answers settling now have all settled: a batch that answers many requests at
   * once becomes one write, not one per reply. Only the first reply in line can unblock any.
   */
  private deliverSoon(pending: PendingReply): void {
    if (this.deliveryScheduled || pending !== this.pending[this.pendingHead]) return;
    this.deliveryScheduled = true;
    queueMicrotask(this.deliverNow);
  }

  private readonly deliverNow = (): void => {
    this.deliveryScheduled = false;
    this.pump();
  };

  /** Encodes the replies at the head of the line whose answers have come, in order. */
  private deliver(): void {
    while (this.pendingHead < this.pending.length && !this.writeBlocked) {
      const next = this.pending[this.pendingHead]!;
      if (next.state === WAITING) break;
      if (this.turnBytes >= MAX_REPLY_BYTES_PER_TURN) {
        this.yieldTurn();
        break;
      }
      if (next.state === ANSWERED) {
        this.pending[this.pendingHead++] = undefined;
        if (HOLDS_DECODING[next.command]) {
          if (--this.holdingDecoding < 0) throw new Error('a reply that holds decoding delivered that was never counted');
          if (this.holdingDecoding === 0) this.decodingResumedAt = this.host.now();
        }
        try {
          next.encode(this.replies, next.value as never);
        } catch (error) {
          next.state = FAILED;
          next.error = error;
        }
      }
      if (next.state === FAILED) {
        this.flush();
        this.hangUpOn(next.error, next.command);
        return;
      }
      if (this.replies.length >= FLUSH_THRESHOLD) this.flush();
    }
    if (this.pendingHead === this.pending.length) {
      this.pending.length = 0;
      this.pendingHead = 0;
    } else if (this.pendingHead >= MAX_OUTSTANDING_ANSWERS) {
      this.pending = this.pending.slice(this.pendingHead);
      this.pendingHead = 0;
    }
  }

  /**
   * Bad input or a command that threw: hang up now if nothing is outstanding, else once the
   * replies before it are written (a failed entry takes its place in line).
   */
  private fail(error: unknown): void {
    if (!this.advance(Phase.Halted)) return; // halted or closing already: nothing left to stop
    if (this.outstanding === 0) {
      this.flush();
      this.hangUpOn(error, NO_COMMAND);
      return;
    }
    const failed = new PendingReply(NO_COMMAND, () => {}, undefined);
    failed.state = FAILED;
    failed.error = error;
    this.pending.push(failed);
  }

  /**
   * The waits outstanding (0x0B, 0x0C) end: each that waits for its grant or loss, now or once it
   * begins to (a cluster node's 0x0B waits only once its command applied), fails, so the replies
   * before it are written and then the connection closes; nothing after it was decoded (a wait holds
   * decoding), and nothing more will be. An answer that comes without waiting (a grant at once, a
   * refusal, "not the owner") is still given. `cancel`: a waiting 0x0B entry leaves its queue.
   *
   * A wait lasts only while the client's sending side is open. TCP does not tell a client that
   * half-closed (`nc -N`) from one that was killed, and a killed waiter must not be granted a lock
   * it can never release: so a client's FIN ends its waits (`cancel`). A shutdown ends them too,
   * keeping their entries (see quiesce).
   */
  private endWaits(cancel: boolean): void {
    if (this.phase >= Phase.Closing) return;
    for (let i = this.pendingHead; i < this.pending.length; i++) this.pending[i]?.waiting?.abandon(!cancel, WAIT_ENDED);
  }

  /** Logs why (naming the command whose answer failed, if any) and hangs up. */
  private hangUpOn(error: unknown, command: number): void {
    if (error instanceof UnknownCommandError || error instanceof StaleInputError || error instanceof WaitEndedError) {
      this.host.logger.debug?.(`${this.peer} sent ${error.message}; hanging up on them`);
    } else {
      const message = error instanceof Error ? error.message : String(error);
      this.host.logger.event('connection-error', {
        peer: this.peer,
        command: COMMAND_NAMES[command],
        error: message,
      });
    }
    this.hangUp();
  }

  /** Releases (0x05, 0x06): the count, and a nudge to drain mode, which waits for an empty table. */
  private readonly encodeRemoved = (out: BufferWriter, removed: number): void => {
    encodeCountReply(out, removed);
    if (removed > 0) this.host.afterRemoval();
  };

  private notifyQuiet(): void {
    const resolve = this.onQuiet;
    this.onQuiet = undefined;
    resolve?.();
  }

  /**
   * Housekeeping's idle check: true once nothing has come in or gone out for `limitMs`, with no
   * answer outstanding and no work of ours waiting. A client that stopped reading our replies
   * counts as idle too (like Redis's `timeout`).
   */
  idleFor(limitMs: number, now: number): boolean {
    if (this.phase >= Phase.Closing) return false;
    if (this.stirred || this.pumping || this.nextTurnScheduled || this.outstanding > 0) {
      this.stirred = false;
      this.quietSince = now;
      return false;
    }
    return now - this.quietSince >= limitMs;
  }

  /** Closes at once, dropping replies not yet taken by a client that stopped reading (idle timeout). */
  drop(): void {
    this.advance(Phase.Closing);
    this.socket.destroy();
    this.reportBuffered();
  }

  /**
   * Closes once the replies already handed to the socket are delivered (bad input, frame
   * timeout). Once closing, a second close of this kind has nothing left to do.
   */
  hangUp(): void {
    if (this.advance(Phase.Closing)) this.socket.destroySoon();
  }

  /**
   * Stops taking input (shutdown); resolves once every request already received has been
   * answered and its reply handed to the socket, or the connection has closed.
   */
  quiesce(): Promise<void> {
    this.advance(Phase.Quiescing);
    // Nothing is granted to a node going down: its waits end, their entries kept (saved, or still
    // in the cluster), so a client that reconnects and asks again keeps its place in line.
    this.endWaits(false);
    if (this.phase >= Phase.Closing || this.caughtUp) return Promise.resolve();
    return new Promise((resolve) => (this.onQuiet = resolve));
  }

  /**
   * Input that may have waited too long (cluster mode: through a stall of this process, or behind
   * a deep pipeline): its client may have given up on it long ago and been answered by another node
   * since, so nothing more is decoded or run, and the connection closes once every command already
   * submitted is answered (closing earlier would let those commit after the close).
   */
  private refuseStaleInput(): void {
    this.host.staleInputRefused(this.peer);
    this.fail(new StaleInputError());
  }

  /** Final close at shutdown: replies already written are delivered, then the socket ends. */
  end(): void {
    this.hangUp();
  }
}

function describe(request: Request): string {
  const parts: string[] = [];
  if ('key' in request) parts.push(`key="${printable(request.key)}"`);
  if ('index' in request) parts.push(`index="${printable(request.index)}"`);
  if ('owner' in request) parts.push(`owner="${printable(request.owner)}"`);
  if (request.command === Command.Request || request.command === Command.RequestFenced || request.command === Command.AcquireWait) {
    parts.push(`ttl=${request.ttl}s ttw=${request.ttw}s priority=${request.priority}`);
  }
  if (request.command === Command.AcquireWait) parts.push(request.waitMs === NO_WAIT_BOUND ? 'wait=unbounded' : `wait=${request.waitMs}ms`);
  return parts.join(' ');
}
