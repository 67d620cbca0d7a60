import { SETUP_LABELS, WAY_LABELS, type HandoffResult, type Spread } from '../scenarios/handoff.js';
import { num, table } from './format.js';
import { renderIdleWaiters } from './idleWaiters.js';

/** A column of handoff tries: median (min–max) ms. */
function spreadCell(s: Spread | undefined, tries: number): string {
  if (s === undefined) return '–';
  const of = s.count < tries ? ` [${s.count} of ${tries}]` : '';
  return `${num(s.median, 1)} (${num(s.min, 1)}–${num(s.max, 1)})${of}`;
}
/** Issue 37: handoff latency, and what idle waiters cost etcd. */
export function renderHandoff(h: HandoffResult): string[] {
  const out: string[] = [];
  out.push('#### Handoff (issue 37)', '');
  if (h.rows.length > 0) {
    out.push(
      `**Handoff latency**: an owner holds a lock, a waiter queues behind it, and ${num(h.delayMs.min)}–${num(h.delayMs.max)} ms after the waiter is seen queued ` +
        `(the same delay for every row in a try: ${h.delaysMs.map((d) => num(d)).join(', ')} ms) the owner lets go: ours with a release (0x05) on its connection, ` +
        "etcdctl's owner (`etcdctl lock NAME`) with SIGTERM (it then unlocks), the Go owner with `Unlock`; the clock is read right before. " +
        '**told**: until the waiter knew it owns (lockctl hold --json printed `{"acquired":true}`, the 0x0B reply was read, the Go `Lock` returned); ' +
        "**ran**: until the command the waiter then ran, `sh -c 'date +%s%N'`, read the clock (lockctl: started while it waits, behind a shell its grant lets go; the raw waiter: spawned by the bench; " +
        'etcdctl and Go: exec from Go). Median (min–max) of the tries, ms. ' +
        '`lockctl hold` is the built CLI of this checkout, however it waits: **requests while queued** counts the lock requests its node saw from the ' +
        'waiter between queued and the release (stats, 0x08): its polls (0 for a waiter by 0x0B). ' +
        "**release answered**: until the owner's release was answered (our 0x05 reply, the Go `Unlock` returned): the owner's own commit, for comparison. " +
        `Each try's rows run one right after the other, first row turning each try. Clock check: the bench's wall clock minus Date.now() ${num(h.clockSkewMs.start, 2)} ms at the start` +
        `${h.clockSkewMs.end !== undefined ? `, ${num(h.clockSkewMs.end, 2)} ms at the end` : ''}.`,
    );
    const leaders =
      h.lockLeader !== undefined || h.etcdLeader !== undefined
        ? ` 3-node rows: lockserver leader ${h.lockLeader ?? '?'}, etcd leader ${h.etcdLeader ?? '?'}.`
        : '';
    const versions = [h.etcdVersion !== undefined ? `etcd ${h.etcdVersion}` : undefined, h.goVersion].filter((v) => v !== undefined).join(', ');
    if (leaders !== '' || versions !== '') out.push('', `${versions !== '' ? `${versions}.` : ''}${leaders}`.trim());
    out.push('');
    out.push(
      table(
        ['setup', 'waiter', 'owner / waiter', 'told ms', 'ran ms', 'release answered ms', 'requests while queued', 'failed tries'],
        h.rows.map((r) =>
          r.skipped !== undefined
            ? [SETUP_LABELS[r.setup], WAY_LABELS[r.way], '–', `skipped: ${r.skipped}`, '–', '–', '–', '–']
            : [
                SETUP_LABELS[r.setup],
                WAY_LABELS[r.way],
                r.ends,
                spreadCell(r.told, h.tries),
                spreadCell(r.ran, h.tries),
                spreadCell(r.released, h.tries),
                r.requestsWhileQueued === undefined
                  ? '–'
                  : `${num(r.requestsWhileQueued.median)} (${num(r.requestsWhileQueued.min)}–${num(r.requestsWhileQueued.max)})`,
                num(r.failures),
              ],
        ),
      ),
    );
    const failed = h.rows.flatMap((r) =>
      r.samples.filter((s) => s.error !== undefined).map((s) => `${SETUP_LABELS[r.setup]}, ${WAY_LABELS[r.way]}: ${s.error}`),
    );
    if (failed.length > 0) out.push('', 'Failed tries:', '', ...failed.map((f) => `- ${f}`));
    out.push('');
  }
  if (h.waiters !== undefined) out.push(...renderIdleWaiters(h.waiters));
  return out;
}
