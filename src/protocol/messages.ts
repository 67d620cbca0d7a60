import type { ByteString } from '../bytes.js';
import { Command } from './constants.js';

/** The fields of a lock request (0x02, 0x0A, and 0x0B before its wait bound); LockService takes the same (LockRequest). */
export interface RequestedLock {
  readonly key: ByteString;
  readonly index: ByteString;
  readonly owner: ByteString;
  /** Seconds an owner keeps the lock without renewal; 0 = no expiry. */
  readonly ttl: number;
  /** Seconds a waiter stays queued without renewal; 0 = no expiry. */
  readonly ttw: number;
  /** 0–255, higher first. */
  readonly priority: number;
}

/** A decoded client request. Strings are byte strings (see bytes.ts). */
export type Request =
  | { readonly command: typeof Command.FindOwner; readonly key: ByteString; readonly index: ByteString }
  | (RequestedLock & { readonly command: typeof Command.Request | typeof Command.RequestFenced })
  | {
      readonly command: typeof Command.FindLocation | typeof Command.Renew | typeof Command.Release | typeof Command.Fence;
      readonly key: ByteString;
      readonly index: ByteString;
      readonly owner: ByteString;
    }
  | (RequestedLock & {
      readonly command: typeof Command.AcquireWait;
      /** Milliseconds to wait for the lock at most; 0 = answer at once, NO_WAIT_BOUND = no bound. */
      readonly waitMs: number;
    })
  | { readonly command: typeof Command.AwaitLoss; readonly key: ByteString; readonly index: ByteString; readonly owner: ByteString }
  | { readonly command: typeof Command.ReleaseAll; readonly owner: ByteString }
  | { readonly command: typeof Command.List | typeof Command.ListDetailed; readonly key: ByteString }
  | { readonly command: typeof Command.Stats };

/** A request with fence (0x0A) answered: the position, and the grant's token when the position is 1 (else 0). */
export interface FencedPosition {
  readonly position: number;
  readonly token: number;
}

/** One entry of a list-contenders (0x07) reply. */
export interface Contender {
  readonly priority: number;
  readonly ttl: number;
  readonly ttw: number;
  readonly index: ByteString;
  readonly owner: ByteString;
  readonly isOwner: boolean;
}

/** An entry as the detailed list (0x0D) shows it: what 0x07 shows, and the time its phase has left and its token. */
export interface EntryView extends Contender {
  /** Milliseconds left in its current phase (the answering node's clock), or null when that phase never expires. */
  readonly remainingMs: number | null;
  /** Its grant's fencing token while it owns; 0 while it waits. */
  readonly token: number;
}

/** One (key, index) queue as the detailed list (0x0D) shows it. */
export interface QueueView {
  readonly index: ByteString;
  /** Milliseconds its lock is still held back after its owner's TTL ran out (lock-delay), 0 when it is not. */
  readonly heldForMs: number;
  /** Owner first, then waiters in queue order. */
  readonly entries: readonly EntryView[];
}

/** The stats (0x08) reply, in wire order. */
export interface StatsReply {
  readonly uptimeSeconds: number;
  readonly lockRequests: number;
  readonly ownerLookups: number;
  readonly contenderLookups: number;
  readonly renewals: number;
  readonly releases: number;
  readonly releaseAlls: number;
  readonly listRequests: number;
  readonly statsRequests: number;
  readonly acceptedConnections: number;
  readonly rejectedNotInHosts: number;
  readonly rejectedTooBusy: number;
  readonly owners: number;
  readonly contenders: number;
  readonly activeConnections: number;
}

/** Field order of the stats reply; the codec on both sides walks this list. */
export const STATS_FIELDS = [
  'uptimeSeconds',
  'lockRequests',
  'ownerLookups',
  'contenderLookups',
  'renewals',
  'releases',
  'releaseAlls',
  'listRequests',
  'statsRequests',
  'acceptedConnections',
  'rejectedNotInHosts',
  'rejectedTooBusy',
  'owners',
  'contenders',
] as const satisfies ReadonlyArray<keyof StatsReply>;
