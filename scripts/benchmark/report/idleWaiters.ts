import { checkWaitingAddsNothing } from '../goals.js';
import { WAITERS_CASE_LABELS, type IdleWaitersResult, type WaitersCase } from '../scenarios/idleWaiters.js';
import { cores, num, table } from './format.js';

/** The busiest gRPC methods of a window: requests/s (messages/s where they differ). */
function busiestMethods(c: WaitersCase): string {
  const methods = Object.entries(c.rates?.byMethod ?? {})
    .sort(([, a], [, b]) => b.messagesPerSecond + b.requestsPerSecond - (a.messagesPerSecond + a.requestsPerSecond))
    .slice(0, 4);
  if (methods.length === 0) return '–';
  return methods
    .map(
      ([name, m]) =>
        `${name} ${num(m.requestsPerSecond, 1)}${Math.abs(m.messagesPerSecond - m.requestsPerSecond) >= 0.05 ? ` (${num(m.messagesPerSecond, 1)} msg)` : ''}`,
    )
    .join(', ');
}
/** Idle waiters: etcd's requests, messages and proposals per second with no waiter, waiting by 0x0B, and polling by 0x02. */
export function renderIdleWaiters(w: IdleWaitersResult): string[] {
  const out: string[] = [];
  if (w.skipped !== undefined) return ['**Idle waiters**: skipped (' + w.skipped + ').', ''];
  const cases = w.cases ?? [];
  out.push(
    `**Idle waiters' cost to etcd**: a fresh 3-node cluster on 3 members; ${num(w.waiters)} locks held (TTL 0: their owners send nothing more), then one ` +
      `${num((w.windowMs ?? 0) / 1000, 1)} s window per case, in this order: no waiter, a waiter behind each lock waiting by acquire-and-wait (0x0B, no bound, TTW 0; ` +
      `on connections spread over the 3 nodes), no waiter again, a waiter behind each polling the old way (request 0x02 every ${num((w.pollMs ?? 0) / 1000, 1)} s, TTW 30 s, ` +
      "each from its own phase). From the members' /metrics: **requests/s**, `grpc_server_handled_total` summed over the members " +
      "(unary calls answered; a stream counts when it ends); **messages/s**, `grpc_server_msg_received_total` summed (a stream's messages too: lease keep-alives, watch requests); " +
      '**proposals/s**, the largest increase of `etcd_server_proposals_committed_total` among the members (Raft entries committed: the writes). ' +
      `Lockserver leader ${w.lockLeader ?? '?'}, etcd leader ${w.etcdLeader ?? '?'}.`,
  );
  out.push('');
  const base = cases.find((c) => c.name === 'idle')?.rates;
  const over = (value: number | undefined, baseline: number | undefined): string =>
    value === undefined || baseline === undefined ? '–' : `${value - baseline >= 0 ? '+' : ''}${num(value - baseline, 1)}`;
  out.push(
    table(
      [
        'case',
        'waiters',
        'requests/s',
        'messages/s',
        'proposals/s',
        'over baseline: requests/s, proposals/s',
        'busiest methods, requests/s',
        'node CPU',
        'etcd CPU',
        'client calls in window',
      ],
      cases.map((c) => [
        WAITERS_CASE_LABELS[c.name],
        num(c.waiters),
        c.error !== undefined ? `failed: ${c.error}` : num(c.rates?.requestsPerSecond, 1),
        num(c.rates?.messagesPerSecond, 1),
        num(c.rates?.proposalsPerSecond, 1),
        c.name === 'idle'
          ? '–'
          : `${over(c.rates?.requestsPerSecond, base?.requestsPerSecond)}, ${over(c.rates?.proposalsPerSecond, base?.proposalsPerSecond)}`,
        busiestMethods(c),
        cores(c.cpuCores?.nodes),
        cores(c.cpuCores?.members),
        c.clientCalls === undefined ? '–' : c.name === 'waiting-0x0b' ? `${num(c.clientCalls)} answered (none should be)` : `${num(c.clientCalls)} polls`,
      ]),
    ),
  );
  if ((w.pollErrors ?? 0) > 0) out.push('', `Polls that failed (each stopped its poller): ${num(w.pollErrors)}.`);
  const promise = checkWaitingAddsNothing(cases);
  if (promise !== undefined) out.push('', `Issue 37's promise, ${promise.goal}: ${promise.met === true ? 'met' : '**missed**'}: ${promise.measured}.`);
  out.push('');
  return out;
}
