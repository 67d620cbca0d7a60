import type { Socket } from 'node:net';
import { printable } from '../bytes.js';
import type { Answer, LockCounts, LockService } from '../locks/LockService.js';
import { BufferWriter } from '../protocol/BufferWriter.js';
import { ANY_INDEX, Command, COMMAND_NAMES, MAX_U16 } from '../protocol/constants.js';
import { RequestDecoder, UnknownCommandError } from '../protocol/decodeRequest.js';
import {
  encodeCountReply,
  encodeListReply,
  encodeOwnerReply,
  encodePositionReply,
  encodeStatsReply,
  encodeSuccessReply,
} from '../protocol/encodeReply.js';
import type { Request } from '../protocol/messages.js';
import type { StatsReply } from '../protocol/messages.js';
import type { Logger } from './Logger.js';

/** Unparsed input held per connection before we stop reading from its socket. */
const MAX_PENDING_INPUT = 64 * 1024;
/** Replies gathered before they are handed to the socket mid-batch. */
const FLUSH_THRESHOLD = 16 * 1024;
const REPLY_BUFFER_INITIAL = 256;
const REPLY_BUFFER_RETAINED = 64 * 1024;

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
  onPartialFrame(connection: Connection): void;
  onClosed(connection: Connection): void;
}

/**
 * One accepted client: decodes its byte stream, runs each request against the lock service in
 * order, and writes the replies in the same order. Pipelined requests are answered in batches;
 * when the client stops reading, we stop reading from it (backpressure), so neither side can
 * make us buffer without bound.
 */
export class Connection {
  private readonly decoder = new RequestDecoder();
  private readonly replies = new BufferWriter(REPLY_BUFFER_INITIAL, REPLY_BUFFER_RETAINED);
  private running = false;
  private writeBlocked = false;
  private inputPaused = false;
  private peerEnded = false;
  private stopped = false;
  private closed = false;
  /** When the current incomplete frame began to arrive; undefined when none is pending. */
  partialSince: number | undefined;
  /** Settles when the current batch of requests is done. */
  private idle: Promise<void> = Promise.resolve();

  constructor(
    readonly socket: Socket,
    readonly peer: string,
    private readonly host: ConnectionHost,
  ) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => {
      this.peerEnded = true;
      this.kick();
    });
    socket.on('error', (error) => this.host.logger.debug?.(`${this.peer} went away badly: ${error.message}`));
    socket.on('close', () => {
      this.closed = true;
      this.host.onClosed(this);
    });
  }

  private onData(chunk: Buffer): void {
    if (this.stopped) return;
    this.decoder.push(chunk);
    if (this.decoder.pendingBytes > MAX_PENDING_INPUT) this.pauseInput();
    this.kick();
  }

  private kick(): void {
    if (this.running || this.stopped) return;
    this.running = true;
    this.idle = this.run().finally(() => {
      this.running = false;
    });
  }

  private pauseInput(): void {
    if (this.inputPaused) return;
    this.inputPaused = true;
    this.socket.pause();
  }

  private resumeInput(): void {
    if (!this.inputPaused || this.stopped) return;
    this.inputPaused = false;
    this.socket.resume();
  }

  private async run(): Promise<void> {
    let completed = 0;
    try {
      while (!this.writeBlocked && !this.stopped) {
        const request = this.decoder.next();
        if (request === undefined) break;
        completed++;
        const observer = this.host.commandObserver;
        if (observer === undefined) {
          const pending = this.execute(request);
          if (pending !== undefined) await pending;
        } else {
          const started = this.host.now();
          const pending = this.execute(request);
          if (pending !== undefined) await pending;
          observer.commandDone(request.command, this.host.now() - started);
        }
        if (this.replies.length >= FLUSH_THRESHOLD) this.flush();
      }
    } catch (error) {
      this.flush();
      if (error instanceof UnknownCommandError) {
        this.host.logger.debug?.(`${this.peer} sent ${error.message}; hanging up on them`);
      } else {
        this.host.logger.event('connection-error', { peer: this.peer, error: (error as Error).message });
      }
      this.hangUp();
      return;
    }
    this.flush();
    if (this.stopped || this.writeBlocked) return;
    if (this.decoder.pendingBytes === 0) {
      this.partialSince = undefined;
    } else if (completed > 0 || this.partialSince === undefined) {
      this.partialSince = this.host.now();
      this.host.onPartialFrame(this);
    }
    if (this.peerEnded) {
      // Half-closed by the client: every reply has been written; now close our side too.
      this.stopped = true;
      this.socket.end();
      return;
    }
    if (this.decoder.pendingBytes <= MAX_PENDING_INPUT) this.resumeInput();
  }

  private flush(): void {
    if (this.replies.length === 0 || this.closed) return;
    if (this.socket.write(this.replies.flush())) return;
    this.writeBlocked = true;
    this.pauseInput();
    this.socket.once('drain', () => {
      this.writeBlocked = false;
      this.kick();
    });
  }

  /**
   * Runs one request and writes its reply. Returns undefined when the service answered at once
   * (the local table always does), else a promise that settles once the reply is written: a
   * promise and an await per command cost the single node a third of its pipelined throughput.
   */
  private execute(request: Request): Promise<void> | undefined {
    const { service, logger } = this.host;
    this.host.countCommand(request.command);
    logger.debug?.(`${this.peer} asks ${COMMAND_NAMES[request.command]} ${describe(request)}`);
    switch (request.command) {
      case Command.FindOwner:
        return this.reply(service.findOwner(request.key, request.index), encodeOwnerReply);
      case Command.Request:
        return this.reply(service.request(request, !this.host.draining), encodePositionReply);
      case Command.FindLocation:
        return this.reply(service.location(request.key, request.index, request.owner), encodePositionReply);
      case Command.Renew:
        return this.reply(service.renew(request.key, request.index, request.owner), encodeSuccessReply);
      case Command.Release:
        return this.reply(
          request.index === ANY_INDEX
            ? service.releaseKey(request.key, request.owner)
            : service.release(request.key, request.index, request.owner),
          this.encodeRemoved,
        );
      case Command.ReleaseAll:
        return this.reply(service.releaseAll(request.owner), this.encodeRemoved);
      case Command.List:
        return this.reply(service.list(request.key, MAX_U16), encodeListReply);
      case Command.Stats:
        return this.reply(service.counts(), (out, counts) => encodeStatsReply(out, this.host.statsSnapshot(counts)));
    }
  }

  /** Encodes an answer now, or once it arrives when the service answered with a (native) promise. */
  private reply<T>(answer: Answer<T>, encode: (out: BufferWriter, value: T) => void): Promise<void> | undefined {
    if (!(answer instanceof Promise)) {
      encode(this.replies, answer);
      return undefined;
    }
    return answer.then((value) => encode(this.replies, value));
  }

  /** Releases (0x05, 0x06): the count, and a nudge to drain mode, which waits for an empty table. */
  private readonly encodeRemoved = (out: BufferWriter, removed: number): void => {
    encodeCountReply(out, removed);
    if (removed > 0) this.host.afterRemoval();
  };

  /** Closes at once after what has been answered so far (bad input, frame timeout). */
  hangUp(): void {
    this.stopped = true;
    this.socket.destroySoon();
  }

  /** Stops taking requests (shutdown); resolves when the batch under way has been answered. */
  async quiesce(): Promise<void> {
    this.stopped = true;
    this.socket.pause();
    await this.idle;
  }

  /** Final close at shutdown: replies already written are delivered, then the socket ends. */
  end(): void {
    this.stopped = true;
    this.socket.destroySoon();
  }
}

function describe(request: Request): string {
  const parts: string[] = [];
  if ('key' in request) parts.push(`key="${printable(request.key)}"`);
  if ('index' in request) parts.push(`index="${printable(request.index)}"`);
  if ('owner' in request) parts.push(`owner="${printable(request.owner)}"`);
  if (request.command === Command.Request) {
    parts.push(`ttl=${request.ttl}s ttw=${request.ttw}s priority=${request.priority}`);
  }
  return parts.join(' ');
}
