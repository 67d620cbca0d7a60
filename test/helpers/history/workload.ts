import { setTimeout as delay } from 'node:timers/promises';
import type { Random } from '../../../src/runtime/Random.js';
import { FailoverClient } from './client.js';

/** The shared key the workers contend on, its indexes, and the key of the TTL-0 grants. */
export const KEY = 'k';
export const INDEXES = ['0', '1'];
export const KEEP_KEY = 'keep';
/** TTW of every request: short, so that waits run out while a leader is stalled. */
const TTW = 2;

const between = (random: Random, low: number, high: number): number => low + Math.floor(random() * (high - low + 1));

/**
 * One 0.9b-style worker, until `stopped()`:
 *  - first a TTL-0 grant of its own (key "keep", index = its name), never released: it must
 *    survive every fault (checkLost);
 *  - then, over and over, on the shared key: request (0x02, TTL 3–4 s, TTW 2 s) an index (it
 *    keeps its index with probability 0.7, as a client working on one row does), poll its
 *    location (0x03) every 250 ms until it says 1 — re-sending the request only after 1–4 s, so
 *    that its wait may run out — and giving up after 8 s; as owner, hold 0.3–2.5 s while reading
 *    (0x01, 0x07) and renewing (0x04, and whenever half the TTL has passed); then release (0x05),
 *    repeated on the next node until answered.
 * A command without a reply moves the client to another node; a request without a reply is
 * released there (its outcome is unknown).
 */
export async function runWorker(client: FailoverClient, random: Random, stopped: () => boolean): Promise<void> {
  const me = client.name;
  while (!stopped() && (await client.call({ cmd: 'request', key: KEEP_KEY, index: me, owner: me, ttl: 0, ttw: 0 })) !== 1) await delay(100);
  let index = INDEXES[between(random, 0, INDEXES.length - 1)]!;
  const release = async (): Promise<void> => {
    for (let attempt = 0; attempt < 5 && !stopped(); attempt++) {
      if ((await client.call({ cmd: 'release', key: KEY, index, owner: me })) !== undefined) return;
    }
  };
  while (!stopped()) {
    if (random() > 0.7) index = INDEXES[between(random, 0, INDEXES.length - 1)]!;
    const ttl = between(random, 3, 4);
    const request = async (): Promise<number | undefined> =>
      (await client.call({ cmd: 'request', key: KEY, index, owner: me, ttl, ttw: TTW })) as number | undefined;
    let position = await request();
    let renewedAt = Date.now();
    const waitUntil = Date.now() + 8_000;
    let renewWaitAfter = between(random, 1_000, 4_000);
    while (position !== undefined && position !== 1 && Date.now() < waitUntil && !stopped()) {
      await delay(250);
      if (position === 0 || Date.now() - renewedAt >= renewWaitAfter) {
        position = await request();
        renewedAt = Date.now();
        renewWaitAfter = between(random, 1_000, 4_000);
      } else {
        position = (await client.call({ cmd: 'location', key: KEY, index, owner: me })) as number | undefined;
      }
    }
    if (position === 1) {
      const holdUntil = Date.now() + between(random, 300, 2_500);
      while (Date.now() < holdUntil && !stopped()) {
        await delay(between(random, 150, 400));
        const roll = random();
        if (Date.now() - renewedAt >= (ttl * 1000) / 2 || roll < 0.2) {
          const sentAt = Date.now();
          const renewed = await client.call({ cmd: 'renew', key: KEY, index, owner: me });
          if (renewed !== true) break;
          renewedAt = sentAt;
        } else if (roll < 0.55) {
          await client.call({ cmd: 'owner', key: KEY, index });
        } else if (roll < 0.75) {
          await client.call({ cmd: 'list', key: KEY });
        }
      }
    }
    await release();
  }
}

/**
 * Write load, until `stopped()`: request (TTL 3 s) and release a fresh key of its own, as fast as
 * the node answers; 100 ms of rest after a command without a reply. Its commands fill the nodes'
 * batches, so through the leader's sequencer the checked workers' commands ride in bundles with other nodes' batches.
 */
export async function runBusy(client: FailoverClient, stopped: () => boolean): Promise<void> {
  const me = client.name;
  for (let n = 0; !stopped(); n++) {
    const key = `busy-${me}-${n}`;
    const granted = await client.call({ cmd: 'request', key, index: '0', owner: me, ttl: 3, ttw: 0 });
    const released = granted === undefined ? undefined : await client.call({ cmd: 'release', key, index: '0', owner: me });
    if (released === undefined) await delay(100);
  }
}

/** Reads (0x01) one node every 250 ms, never failing over: the node's availability over time. */
export async function runProbe(probe: FailoverClient, stopped: () => boolean): Promise<void> {
  while (!stopped()) {
    await probe.call({ cmd: 'owner', key: KEY, index: INDEXES[0]! });
    await delay(250);
  }
}
