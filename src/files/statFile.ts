import type { StatsReply } from '../protocol/messages.js';
import { writeFileAtomic } from './atomicWrite.js';

/** Labels in the order and words of the protocol document's stats list. */
const LABELS: ReadonlyArray<[keyof StatsReply, string]> = [
  ['uptimeSeconds', 'uptime (seconds)'],
  ['lockRequests', 'lock requests'],
  ['ownerLookups', 'owner lookups'],
  ['contenderLookups', 'contender lookups'],
  ['renewals', 'lock renewal requests'],
  ['releases', 'specific lock releases'],
  ['releaseAlls', 'general lock releases'],
  ['listRequests', 'lock dump requests'],
  ['statsRequests', 'statistics requests'],
  ['acceptedConnections', 'accepted connections'],
  ['rejectedNotInHosts', 'rejected connections (not in hosts file)'],
  ['rejectedTooBusy', 'rejected connections (too busy)'],
  ['owners', 'current lock owners'],
  ['contenders', 'current lock contenders (non owners)'],
  ['activeConnections', 'active connections'],
];
const LABEL_WIDTH = Math.max(...LABELS.map(([, label]) => label.length)) + 2;

/** The human-readable stat file written on SIGUSR1. */
export function formatStats(stats: StatsReply, at = new Date()): string {
  let text = `LockServer statistics at ${at.toISOString()}\n`;
  for (const [field, label] of LABELS) text += `${(label + ':').padEnd(LABEL_WIDTH)}${stats[field]}\n`;
  return text;
}

/** Replaces the stat file with the current figures (atomically, so readers never see half). */
export async function writeStatFile(file: string, stats: StatsReply): Promise<void> {
  await writeFileAtomic(file, [formatStats(stats)]);
}
