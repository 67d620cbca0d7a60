/**
 * Wire constants of the LockServer 0.9b protocol, and of our extensions (fencing tokens, 0x09 and
 * 0x0A; waiting without polling, 0x0B and 0x0C; the detailed list, 0x0D: command bytes 0.9b never
 * used, so an old client never sends them). Every length the codec uses is named here.
 */

/** The single byte the server writes when a connection is accepted or refused. */
export const GREETING_ACCEPTED = 0x01;
export const GREETING_REFUSED = 0x00;

/** Command bytes (one byte each, first byte of every request). */
export const Command = {
  FindOwner: 0x01,
  Request: 0x02,
  FindLocation: 0x03,
  Renew: 0x04,
  Release: 0x05,
  ReleaseAll: 0x06,
  List: 0x07,
  Stats: 0x08,
  /** Extension: the fencing token of the owner's current grant (0 = not the owner). */
  Fence: 0x09,
  /** Extension: request (0x02) answering the position and, when it is 1, the grant's fencing token. */
  RequestFenced: 0x0a,
  /**
   * Extension: request with fence (0x0A) that waits up to a bound for the lock: answered once the
   * requester owns (1 and its token), when the bound passes (its position now), or when its entry
   * goes (0). The connection's later replies wait behind it.
   */
  AcquireWait: 0x0b,
  /** Extension: answered when the owner's entry stops owning, with how (the loss notice); at once if it does not own. */
  AwaitLoss: 0x0c,
  /** Extension: list (0x07) by queue, with each lock's lock-delay left and each entry's time left and token. */
  ListDetailed: 0x0d,
} as const;
export type Command = (typeof Command)[keyof typeof Command];

/**
 * Not a command: a cluster node that sends this byte first on a connection to another node's lock
 * port turns it into a link between the two (src/cluster/peer). No lock client sends it; a single
 * node, or a connection that sent anything before it, hangs up on it as on any unknown byte.
 */
export const PEER_LINK_BYTE = 0x50;

export const COMMAND_NAMES: Readonly<Record<number, string>> = {
  [Command.FindOwner]: 'find-owner',
  [Command.Request]: 'request',
  [Command.FindLocation]: 'find-location',
  [Command.Renew]: 'renew',
  [Command.Release]: 'release',
  [Command.ReleaseAll]: 'release-all',
  [Command.List]: 'list',
  [Command.Stats]: 'stats',
  [Command.Fence]: 'fence',
  [Command.RequestFenced]: 'request-fenced',
  [Command.AcquireWait]: 'acquire-wait',
  [Command.AwaitLoss]: 'await-loss',
  [Command.ListDetailed]: 'list-detailed',
};

export const COMMAND_BYTE_LENGTH = 1;
/** Every string is sent as a one-byte length followed by that many bytes, not NUL-terminated. */
export const STRING_LENGTH_PREFIX = 1;
export const TTL_LENGTH = 2;
export const TTW_LENGTH = 2;
export const PRIORITY_LENGTH = 1;
export const POSITION_LENGTH = 2;
export const COUNT_LENGTH = 2;
export const SUCCESS_LENGTH = 1;
export const OWNER_FLAG_LENGTH = 1;
export const STAT_VALUE_LENGTH = 4;
export const ACTIVE_CONNECTIONS_LENGTH = 2;
/** A fencing token: an unsigned 64-bit integer (the server issues values below 2^53). */
export const TOKEN_LENGTH = 8;
/** Acquire and wait (0x0B): the wait bound, milliseconds. */
export const WAIT_LENGTH = 4;
/** A wait bound of this many milliseconds has no bound: the requester waits until it owns or its entry goes. */
export const NO_WAIT_BOUND = 0xffffffff;
/** The loss notice (0x0C): one byte saying how the lock ended (LossReason). */
export const REASON_LENGTH = 1;
/** The detailed list (0x0D): milliseconds, for a lock-delay left and an entry's time left. */
export const MILLISECONDS_LENGTH = 4;
/** An entry's time left, in the detailed list, when its phase never expires. */
export const NEVER_MS = 0xffffffff;

/**
 * How an owner's lock ended, as the loss notice (0x0C) says: NotOwner when it did not own the lock
 * when asked (or, on a cluster node that loaded a snapshot meanwhile, ended in a way it cannot tell).
 */
export const LossReason = {
  NotOwner: 0,
  /** Released by name (0x05). */
  Released: 1,
  /** Released with index `*` (0x05 of every index under the key). */
  ReleasedKey: 2,
  /** Released by release-all (0x06). */
  ReleasedAll: 3,
  /** Its TTL ran out. */
  Expired: 4,
} as const;
export type LossReason = (typeof LossReason)[keyof typeof LossReason];

/** Stats reply: 14 four-byte values, then the two-byte active-connection count. */
export const STAT_VALUE_COUNT = 14;
export const STATS_REPLY_LENGTH = STAT_VALUE_COUNT * STAT_VALUE_LENGTH + ACTIVE_CONNECTIONS_LENGTH;

/** Largest value of a two-byte reply field; counts above it saturate. */
export const MAX_U16 = 0xffff;
export const MAX_U32 = 0xffffffff;

/** Index value that, in a release (0x05), means "every index under this key". */
export const ANY_INDEX = '*';

/**
 * How each request is laid out after its command byte: how many length-prefixed strings, then
 * how many fixed bytes. The frame scanner walks this to know when a whole frame has arrived.
 */
export interface RequestLayout {
  readonly strings: number;
  readonly fixedTail: number;
}

export const REQUEST_LAYOUTS: ReadonlyArray<RequestLayout | undefined> = (() => {
  const layouts: Array<RequestLayout | undefined> = new Array<RequestLayout | undefined>(256).fill(undefined);
  layouts[Command.FindOwner] = { strings: 2, fixedTail: 0 };
  layouts[Command.Request] = { strings: 3, fixedTail: TTL_LENGTH + TTW_LENGTH + PRIORITY_LENGTH };
  layouts[Command.FindLocation] = { strings: 3, fixedTail: 0 };
  layouts[Command.Renew] = { strings: 3, fixedTail: 0 };
  layouts[Command.Release] = { strings: 3, fixedTail: 0 };
  layouts[Command.ReleaseAll] = { strings: 1, fixedTail: 0 };
  layouts[Command.List] = { strings: 1, fixedTail: 0 };
  layouts[Command.Stats] = { strings: 0, fixedTail: 0 };
  layouts[Command.Fence] = { strings: 3, fixedTail: 0 };
  layouts[Command.RequestFenced] = { strings: 3, fixedTail: TTL_LENGTH + TTW_LENGTH + PRIORITY_LENGTH };
  layouts[Command.AcquireWait] = { strings: 3, fixedTail: TTL_LENGTH + TTW_LENGTH + PRIORITY_LENGTH + WAIT_LENGTH };
  layouts[Command.AwaitLoss] = { strings: 3, fixedTail: 0 };
  layouts[Command.ListDetailed] = { strings: 1, fixedTail: 0 };
  return layouts;
})();

/** The longest request frame there can be: an acquire and wait (0x0B) with three 255-byte strings. */
export const MAX_REQUEST_LENGTH = COMMAND_BYTE_LENGTH + 3 * (STRING_LENGTH_PREFIX + 255) + TTL_LENGTH + TTW_LENGTH + PRIORITY_LENGTH + WAIT_LENGTH;
