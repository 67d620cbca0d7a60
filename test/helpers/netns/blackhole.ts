import { inNamespace } from './ip.js';

/** One end of a veth link: the interface and the namespace it lives in (root when undefined). */
export interface LinkEnd {
  readonly ns: string | undefined;
  readonly dev: string;
}

/**
 * Cuts a link silently: a `blackhole` root qdisc on both ends drops every packet each end sends,
 * with no reset and no ICMP, so TCP connections stay open and their data waits in send queues
 * (this kernel has no sch_netem; blackhole is what there is). Idempotent.
 */
export function cut(ends: readonly LinkEnd[]): void {
  for (const end of ends) {
    if (hasBlackhole(end)) continue;
    inNamespace(end.ns, 'tc', ['qdisc', 'add', 'dev', end.dev, 'root', 'blackhole']);
  }
}

/** Removes the blackhole qdiscs again (the default qdisc comes back). Idempotent. */
export function heal(ends: readonly LinkEnd[]): void {
  for (const end of ends) {
    if (!hasBlackhole(end)) continue;
    inNamespace(end.ns, 'tc', ['qdisc', 'del', 'dev', end.dev, 'root']);
  }
}

export function hasBlackhole(end: LinkEnd): boolean {
  return /qdisc blackhole/.test(inNamespace(end.ns, 'tc', ['qdisc', 'show', 'dev', end.dev], { allowFailure: true }));
}
