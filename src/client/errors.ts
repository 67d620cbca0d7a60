import type { LossReason } from '../protocol/constants.js';

/**
 * Errors of the client library. Every one extends LockClientError, so callers can tell "the lock
 * service said something" (a resolved reply, even a negative one) from "we could not ask".
 */
export class LockClientError extends Error {
  override name = 'LockClientError';
}

/**
 * The server answered the connection with greeting 0x00. The protocol uses the same byte for
 * "your address is not in the hosts file" and "too many connections" (and a cluster node uses it
 * for a connection it accepted just after its process stood still), so the causes are named.
 */
export class ServerRefusedError extends LockClientError {
  override name = 'ServerRefusedError';
  constructor(readonly address: string) {
    super(`${address} refused: not in hosts file or too busy, or a cluster node that had just stalled (greeting 0x00; the protocol cannot tell which)`);
  }
}

/** No TCP connection could be made (ECONNREFUSED, EHOSTUNREACH, unknown host, …). */
export class ConnectError extends LockClientError {
  override name = 'ConnectError';
  /** The system error code, e.g. ECONNREFUSED, when there is one. */
  readonly code: string | undefined;
  constructor(address: string, cause: Error) {
    super(`cannot connect to ${address}: ${cause.message}`, { cause });
    this.code = (cause as NodeJS.ErrnoException).code;
  }
}

/** Something took longer than the configured limit. */
export class LockTimeoutError extends LockClientError {
  override name = 'LockTimeoutError';
}

/**
 * The TCP connection, or after it the greeting byte, did not arrive within connectTimeoutMs;
 * `stage` says which (a dead or filtered host never completes the TCP connection; a stuck server
 * accepts it and never greets).
 */
export class ConnectTimeoutError extends LockTimeoutError {
  override name = 'ConnectTimeoutError';
  constructor(
    address: string,
    ms: number,
    readonly stage: 'tcp' | 'greeting' = 'greeting',
  ) {
    super(stage === 'tcp' ? `no TCP connection to ${address} within ${ms} ms` : `connected to ${address}, but no greeting within ${ms} ms`);
  }
}

/**
 * A reply did not arrive within requestTimeoutMs. Replies come strictly in order, so the
 * connection is closed: every later reply would be stuck behind the missing one.
 */
export class RequestTimeoutError extends LockTimeoutError {
  override name = 'RequestTimeoutError';
  constructor(command: string, ms: number) {
    super(`no reply to ${command} within ${ms} ms; connection closed`);
  }
}

/** The connection ended (or was closed) while a request was waiting for its reply. */
export class ConnectionClosedError extends LockClientError {
  override name = 'ConnectionClosedError';
}

/**
 * The server closed the connection instead of answering an extension command (a command byte
 * LockServer 0.9b never used): what a server without that extension does with a byte it does
 * not know. (A connection that broke just then for another reason looks the same, and so does
 * a server that stopped while the command waited: acquire-and-wait, 0x0B, and the loss notice,
 * 0x0C, may wait long.) Requests sent after it on that connection fail with ConnectionClosedError.
 * Callers that can do without the extension catch this and ask again the 0.9b way, through a
 * new connection.
 */
export class ExtensionUnsupportedError extends ConnectionClosedError {
  override name = 'ExtensionUnsupportedError';
  constructor(
    address: string,
    /** The command's name, as COMMAND_NAMES has it (acquire-wait, await-loss, list-detailed, fence, request-fenced). */
    readonly command: string,
    cause: Error,
    message = `${address} closed the connection instead of answering ${command}: a server without it (LockServer 0.9b, or a lockserver older than the command) does that, and so does one that ended while the command was outstanding`,
  ) {
    super(message, { cause });
  }
}

/**
 * The server closed the connection instead of answering a fencing command, fence (0x09) or
 * request with fence (0x0A): what a server without fencing tokens (LockServer 0.9b) does with a
 * command byte it does not know. (A connection that broke just then for another reason looks the
 * same.) Requests sent after it on that connection fail with ConnectionClosedError. Kept as it
 * was before the other extensions, whose ExtensionUnsupportedError it now is a kind of.
 */
export class FencingUnsupportedError extends ExtensionUnsupportedError {
  override name = 'FencingUnsupportedError';
  constructor(address: string, command: string, cause: Error) {
    super(
      address,
      command,
      cause,
      `${address} closed the connection instead of answering ${command}: a server without fencing tokens (LockServer 0.9b) does that`,
    );
  }
}

/** The server sent something the protocol does not allow (a greeting other than 0/1, a reply nobody asked for). */
export class ProtocolError extends LockClientError {
  override name = 'ProtocolError';
}

/** A request (0x02) was answered with position 0: the server is draining (SIGSYS) or its table is full. */
export class LockRefusedError extends LockClientError {
  override name = 'LockRefusedError';
  constructor() {
    super('the server refused a new lock entry (position 0): it is draining or its table is full');
  }
}

/** waitTimeoutMs passed before the lock was ours. */
export class LockWaitTimeoutError extends LockTimeoutError {
  override name = 'LockWaitTimeoutError';
  constructor(readonly ms: number) {
    super(ms === 0 ? 'the lock was not free (no waiting asked for)' : `the lock was not ours within ${ms} ms`);
  }
}

/**
 * A held lock is gone: the server's loss notice said how (`lossReason`), renewal found no entry,
 * no renewal was confirmed within the TTL, or (with a single host) the connection failed.
 */
export class LockLostError extends LockClientError {
  override name = 'LockLostError';
  /** How the lock ended, when the server's loss notice (0x0C) told it (a LossReason); undefined otherwise. */
  readonly lossReason: LossReason | undefined;
  constructor(message: string, options?: ErrorOptions & { readonly lossReason?: LossReason }) {
    super(message, options);
    this.lossReason = options?.lossReason;
  }
}

/**
 * No host of a `hosts` list gave a connection: each was tried once, in order, and `errors` says
 * what each did (refused, unreachable, timed out), in the order tried.
 */
export class AllHostsFailedError extends LockClientError {
  override name = 'AllHostsFailedError';
  constructor(readonly errors: readonly Error[]) {
    super(`no host accepted a connection: ${errors.map((e) => e.message).join('; ')}`);
  }
}
