import type { Clock } from '../runtime/Clock.js';
import type { LockCounts } from '../locks/LockService.js';
import { Command } from '../protocol/constants.js';
import type { StatsReply } from '../protocol/messages.js';

/** Counters the stats command (0x08) and the stat file report. */
export class ServerStats {
  private readonly startedAt: number;
  /** Commands seen, by command byte. */
  readonly commands = new Array<number>(256).fill(0);
  accepted = 0;
  rejectedNotInHosts = 0;
  rejectedTooBusy = 0;
  activeConnections = 0;

  constructor(private readonly clock: Clock) {
    this.startedAt = clock.now();
  }

  get uptimeSeconds(): number {
    return Math.floor((this.clock.now() - this.startedAt) / 1000);
  }

  snapshot(locks: LockCounts): StatsReply {
    const c = this.commands;
    return {
      uptimeSeconds: this.uptimeSeconds,
      // The extensions count as the 0.9b command they extend, so each counter keeps meaning what it
      // says: a request with fence (0x0A) or acquire-and-wait (0x0B) is a lock request, a loss
      // notice (0x0C, the fields of 0x03) a contender lookup, a detailed list (0x0D) a list.
      lockRequests: c[Command.Request]! + c[Command.RequestFenced]! + c[Command.AcquireWait]!,
      ownerLookups: c[Command.FindOwner]!,
      contenderLookups: c[Command.FindLocation]! + c[Command.AwaitLoss]!,
      renewals: c[Command.Renew]!,
      releases: c[Command.Release]!,
      releaseAlls: c[Command.ReleaseAll]!,
      listRequests: c[Command.List]! + c[Command.ListDetailed]!,
      statsRequests: c[Command.Stats]!,
      acceptedConnections: this.accepted,
      rejectedNotInHosts: this.rejectedNotInHosts,
      rejectedTooBusy: this.rejectedTooBusy,
      owners: locks.owners,
      contenders: locks.waiters,
      activeConnections: this.activeConnections,
    };
  }
}
