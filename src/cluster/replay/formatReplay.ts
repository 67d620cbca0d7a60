import { printable } from '../../bytes.js';
import type { QueueView } from '../../protocol/messages.js';
import { LogOp, NO_REMAINING, type LogCommand } from '../LogCodec.js';
import type { ReplayedCommand, ReplayReport } from './replayHistory.js';

/**
 * One line per replayed command, for people: where it sits in the log, who proposed it, what it
 * said, what apply returned, and the key's queues after it (owner first, `*` marking it, with
 * its fencing token; `held back` while a lock-delay holds the lock).
 */
export function formatCommand(r: ReplayedCommand): string {
  const proposer = `${printable(r.proposer)}#${r.incarnation.toString(16).padStart(8, '0')} seq ${r.seq}`;
  const result = r.result === 'duplicate' ? 'duplicate (applied before; changes nothing)' : String(r.result);
  return `v${r.version}:${r.place} rev ${r.revision} ${proposer}  ${formatLogCommand(r.command)} -> ${result}  after: ${formatQueues(r.queues)}`;
}

/** A log command as op and fields; byte strings printable (anything not printable ASCII as \xHH). */
export function formatLogCommand(c: LogCommand): string {
  const entry = (e: { key: string; index: string; owner: string }): string => `${printable(e.key)}/${printable(e.index)} owner ${printable(e.owner)}`;
  switch (c.op) {
    case LogOp.Request:
    case LogOp.AcquireWait:
      return `${c.op === LogOp.AcquireWait ? 'acquire-wait' : 'request'} ${entry(c)} ttl ${c.ttl} ttw ${c.ttw} priority ${c.priority}${c.allowCreate ? '' : ' (draining: no new entry)'}`;
    case LogOp.Renew:
      return `renew ${entry(c)}`;
    case LogOp.Release:
      return `release ${entry(c)}`;
    case LogOp.ReleaseKey:
      return `release ${printable(c.key)}/* owner ${printable(c.owner)}`;
    case LogOp.ReleaseAll:
      return `release-all owner ${printable(c.owner)}`;
    case LogOp.Expire:
      return `expire ${entry(c)} phase of ${c.version}`;
    case LogOp.ExpireAndHold:
      return `expire-and-hold ${entry(c)} phase of ${c.version} hold ${c.holdMs} ms`;
    case LogOp.LiftHold:
      return `lift-hold ${printable(c.key)}/${printable(c.index)} held by the expiry at ${c.version}`;
    case LogOp.CancelWait:
      return `cancel-wait ${entry(c)}`;
    case LogOp.Import:
    case LogOp.ImportStaged:
    case LogOp.ImportStagedFenced: {
      const left = c.remainingMs === NO_REMAINING ? 'never expires' : `${c.remainingMs} ms left`;
      return `import ${entry(c)} ${c.isOwner ? 'owner' : 'waiter'} ttl ${c.ttl} ttw ${c.ttw} ${left}`;
    }
    case LogOp.ImportCommit:
      return `import-commit ${c.importId}`;
    case LogOp.CancelWaitsOf:
      return `cancel-waits-of ${printable(c.node)}#${c.incarnation.toString(16).padStart(8, '0')}`;
  }
}

/** Queues as `index: owner* (token T), waiter, …`; `(none)` when the key has no entry there. */
export function formatQueues(queues: readonly QueueView[]): string {
  if (queues.length === 0) return '(none)';
  return queues
    .map((q) => {
      const entries = q.entries.map((e) => (e.isOwner ? `${printable(e.owner)}* (token ${e.token})` : printable(e.owner)));
      return `${printable(q.index)}: ${q.heldForMs > 0 ? 'held back; ' : ''}${entries.length === 0 ? 'no entry' : entries.join(', ')}`;
    })
    .join(' | ');
}

/** The closing lines: where the replay began and ended, and how its state compares with the newest snapshot. */
export function formatReport(report: ReplayReport): string[] {
  const lines = [
    `replayed from ${report.startedFrom === 'empty' ? 'an empty table' : `the snapshot at version ${report.startedAt.version}`} to the head, version ${report.head.version} (revision ${report.head.revision}): ` +
      `${report.batches} batches, ${report.duplicates} duplicates, ${report.refused.length} refused parts; digest ${report.digest}`,
  ];
  const check = report.check;
  if (check.outcome === 'not-checked') lines.push(`snapshot: not checked: ${check.reason}`);
  else lines.push(`snapshot at version ${check.version}: ${check.outcome} (snapshot ${check.expected}, replayed ${check.replayed})`);
  return lines;
}
