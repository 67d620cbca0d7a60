/**
 * One try of a handoff (issue 37's measure): an owner holds a lock, a waiter queues behind it, the
 * owner lets go after a given delay; how long from the moment right before the owner's release was
 * sent (or its process was signalled) until the waiter was told it owns (`toldMs`) and until the
 * command it then runs, sh -c 'date +%s%N', read the clock (`ranMs`). Each way of waiting is one
 * function here; scenarios/handoff.ts runs them in turn.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { asciiBytes } from '../../../src/bytes.js';
import { PACKAGE_ROOT } from '../../../src/packageRoot.js';
import { Command, NO_WAIT_BOUND } from '../../../src/protocol/constants.js';
import { decodeReply } from '../../../src/protocol/decodeReply.js';
import { BenchClient } from '../BenchClient.js';
import { runEtcdGoHandoff } from '../cluster/etcdGo.js';
import type { Endpoint } from '../load/messages.js';
import { WatchedProcess } from './WatchedProcess.js';

const run = promisify(execFile);

/** What the waiter runs once it owns, as issue 37 ran it. */
export const DATE_COMMAND = ['sh', '-c', 'date +%s%N'] as const;
const LOCKCTL = join(PACKAGE_ROOT, 'dist', 'src', 'cli', 'lockctl.js');
const INDEX = asciiBytes('i');
const OWNER = asciiBytes('owner');
const WAITER = asciiBytes('waiter');
/** TTL and TTW (s) of our owner's entry, and TTL of the raw waiter's: far longer than a try. */
const ENTRY_SECONDS = 30;
/** `etcdctl lock`'s default session TTL (s); the Go waiter gets the same. */
export const ETCD_SESSION_TTL_SECONDS = 10;
/** Longest a try waits for the owner to hold, for the waiter to queue, and for the handoff. */
const STEP_LIMIT_MS = 15_000;
/** How often a try looks for the waiter in the queue. */
const QUEUED_POLL_MS = 5;
/** Longest a client process gets to exit by itself at the end of a try before it is killed. */
const EXIT_LIMIT_MS = 5_000;

/** One try; ms from right before the owner's release (or signal) went. */
export interface HandoffSample {
  readonly delayMs: number;
  /** From the waiter's start until it was seen queued behind the owner. */
  readonly queuedMs?: number;
  /** Until the waiter was told it owns: lockctl's `{"acquired":true}` line read, the 0x0B reply read, the Go Lock returned. */
  readonly toldMs?: number;
  /** Until the waiter's command read the clock (date +%s%N). */
  readonly ranMs?: number;
  /** Until the owner's release was answered: our 0x05 reply read, the Go Unlock returned (etcdctl's owner: not known). */
  readonly releasedMs?: number;
  /**
   * Ours: lock requests (0x02, 0x0A, 0x0B) the waiter's node counted (stats, 0x08) from the waiter
   * seen queued until the release: its polls (a waiter by 0x0B sends none).
   */
  readonly requestsWhileQueued?: number;
  readonly error?: string;
}

/** The wall clock at `perfMs` (a performance.now() reading), in ns since the epoch. */
function wallNs(perfMs: number): bigint {
  return BigInt(Math.round((performance.timeOrigin + perfMs) * 1e6));
}

/** ms from `sentAt` (performance.now()) to the wall-clock time `dateNs` that `date +%s%N` printed. */
function msAfter(sentAt: number, dateNs: bigint): number {
  return Number(dateNs - wallNs(sentAt)) / 1e6;
}

const DATE_LINE = /^\d{15,}$/;

/** Runs the date command from this process: what a waiter that runs its command itself would pay. */
async function runDate(): Promise<bigint> {
  const [file, ...args] = DATE_COMMAND;
  const { stdout } = await run(file, args, { timeout: STEP_LIMIT_MS });
  return BigInt(stdout.trim());
}

/** Resolves once `check` says yes (polled every few ms); rejects after STEP_LIMIT_MS. */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + STEP_LIMIT_MS;
  while (!(await check())) {
    if (performance.now() >= deadline) throw new Error(`${what} not within ${STEP_LIMIT_MS} ms`);
    await delay(QUEUED_POLL_MS);
  }
}

/** `promise`, or a rejection after `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} not within ${ms} ms`)), ms)));
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/** The waiter's two events, each a performance.now() or a date reading; rejections handled until awaited. */
interface WaiterEvents {
  readonly told: Promise<number> | undefined;
  readonly ran: Promise<bigint>;
}

function quiet<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => {});
  return promise;
}

/**
 * After the owner holds and the waiter was started at `startedAt`: waits until `queued` says so,
 * lets `delayMs` pass, calls `release` (right after reading the clock), then waits for the
 * waiter's events. `requests`, if given, is read when the waiter is queued and again just before
 * the clock is read. `answered`: whether `release` resolves when the owner's release is answered
 * (so its time is the sample's releasedMs). The sample, or its error.
 */
async function handOff(
  delayMs: number,
  startedAt: number,
  queued: () => Promise<boolean>,
  release: () => Promise<unknown>,
  waiter: WaiterEvents,
  answered: boolean,
  requests?: () => Promise<number>,
): Promise<HandoffSample> {
  await until('the waiter queued', queued);
  const queuedMs = performance.now() - startedAt;
  const requestsAtQueued = await requests?.();
  await delay(delayMs);
  const requestsAtRelease = await requests?.();
  const sentAt = performance.now();
  const released = quiet(release().then(() => performance.now()));
  const [toldAt, dateNs, releasedAt] = await within(Promise.all([waiter.told, waiter.ran, released]), STEP_LIMIT_MS, 'the handoff');
  return {
    delayMs,
    queuedMs,
    ...(toldAt !== undefined ? { toldMs: toldAt - sentAt } : {}),
    ranMs: msAfter(sentAt, dateNs),
    ...(answered ? { releasedMs: releasedAt - sentAt } : {}),
    ...(requestsAtQueued !== undefined && requestsAtRelease !== undefined ? { requestsWhileQueued: requestsAtRelease - requestsAtQueued } : {}),
  };
}

/** Where our owner and waiter connect (a single node: the same endpoint twice). */
export interface OurEnds {
  readonly owner: Endpoint;
  readonly waiter: Endpoint;
}

/**
 * Ours: the owner takes the lock with 0x0A on its own connection and releases it with 0x05 (the
 * clock read right before the write). The waiter is `lockctl hold KEY i waiter -- sh -c 'date
 * +%s%N'` (the built CLI, --json, so its `{"acquired":true}` line says when it was told), or, raw,
 * one 0x0B (TTW 0, no bound) on a connection of its own, after whose reply this process runs the
 * date command. Queued: a list (0x07) of the key shows two entries. The waiter's polls are counted
 * by the stats (0x08) of its node, read on a connection of the bench's own.
 */
export async function ourHandoff(way: 'lockctl' | 'raw', ends: OurEnds, key: string, delayMs: number): Promise<HandoffSample> {
  const k = asciiBytes(key);
  const owner = await BenchClient.connect(ends.owner);
  const observer = await BenchClient.connect(ends.waiter);
  let waiterClient: BenchClient | undefined;
  let waiterProcess: WatchedProcess | undefined;
  try {
    const [granted] = await owner.call([
      { command: Command.RequestFenced, key: k, index: INDEX, owner: OWNER, ttl: ENTRY_SECONDS, ttw: ENTRY_SECONDS, priority: 0 },
    ]);
    const position = decodeReply(Command.RequestFenced, granted!).position;
    if (position !== 1) throw new Error(`the owner's request answered position ${position}, not 1`);
    const startedAt = performance.now();
    let events: WaiterEvents;
    if (way === 'lockctl') {
      // prettier-ignore
      waiterProcess = WatchedProcess.start(process.execPath, [
        LOCKCTL, '--json', '-H', `${ends.waiter.host}:${ends.waiter.port}`, 'hold', key, INDEX, WAITER, '--', ...DATE_COMMAND,
      ]);
      const told = waiterProcess.line((l) => l.startsWith('{"acquired":true'), 2 * STEP_LIMIT_MS + delayMs, 'acquired line');
      const ran = waiterProcess.line((l) => DATE_LINE.test(l), 2 * STEP_LIMIT_MS + delayMs, 'date line');
      events = { told: quiet(told.then((l) => l.at)), ran: quiet(ran.then((l) => BigInt(l.text))) };
    } else {
      waiterClient = await BenchClient.connect(ends.waiter);
      const told = waiterClient
        .call([{ command: Command.AcquireWait, key: k, index: INDEX, owner: WAITER, ttl: ENTRY_SECONDS, ttw: 0, priority: 0, waitMs: NO_WAIT_BOUND }])
        .then(([reply]) => {
          const at = performance.now();
          const answer = decodeReply(Command.AcquireWait, reply!);
          if (answer.position !== 1) throw new Error(`the 0x0B wait answered position ${answer.position}, not 1`);
          return at;
        });
      events = { told: quiet(told), ran: quiet(told.then(runDate)) };
    }
    const queued = async (): Promise<boolean> => (await owner.call([{ command: Command.List, key: k }]))[0]!.readUInt16BE(0) >= 2;
    const release = () => owner.call([{ command: Command.Release, key: k, index: INDEX, owner: OWNER }]);
    const requests = async (): Promise<number> => decodeReply(Command.Stats, (await observer.call([{ command: Command.Stats }]))[0]!).lockRequests;
    const sample = await handOff(delayMs, startedAt, queued, release, events, true, requests);
    // The raw waiter lets go as lockctl does after its command.
    await waiterClient?.call([{ command: Command.Release, key: k, index: INDEX, owner: WAITER }]);
    return sample;
  } finally {
    owner.close();
    observer.close();
    waiterClient?.close();
    await waiterProcess?.end(EXIT_LIMIT_MS);
  }
}

/** Keys under `prefix` on the member at `url` (etcd's JSON gateway, count only). */
async function keysUnder(url: string, prefix: string): Promise<number> {
  const end = Buffer.from(prefix, 'latin1');
  end[end.length - 1]!++;
  const response = await fetch(`${url}/v3/kv/range`, {
    method: 'POST',
    body: JSON.stringify({ key: Buffer.from(prefix, 'latin1').toString('base64'), range_end: end.toString('base64'), count_only: true }),
    signal: AbortSignal.timeout(STEP_LIMIT_MS),
  });
  return Number(((await response.json()) as { count?: string }).count ?? 0);
}

/** Where etcd's owner and waiter connect (client URLs; one member: the same twice). */
export interface EtcdEnds {
  readonly owner: string;
  readonly waiter: string;
}

/**
 * etcdctl: the owner is `etcdctl lock NAME` (it holds once it prints the key) on its member, the
 * waiter `etcdctl lock NAME -- sh -c 'date +%s%N'` on its own (without `--` etcdctl takes `-c` for
 * its own flag and fails); the owner is ended with SIGTERM (the
 * clock read right before), on which etcdctl unlocks (a Delete) and exits. Queued: two keys under
 * NAME/. No "told" time: etcdctl runs the command straight after its Lock returns.
 */
export async function etcdctlHandoff(ends: EtcdEnds, name: string, delayMs: number): Promise<HandoffSample> {
  const env = { ETCDCTL_API: '3' };
  const owner = WatchedProcess.start('etcdctl', ['--endpoints', ends.owner, 'lock', name], env);
  let waiter: WatchedProcess | undefined;
  try {
    await owner.line((l) => l.startsWith(`${name}/`), STEP_LIMIT_MS, 'held key line');
    const startedAt = performance.now();
    waiter = WatchedProcess.start('etcdctl', ['--endpoints', ends.waiter, 'lock', name, '--', ...DATE_COMMAND], env);
    const ran = waiter.line((l) => DATE_LINE.test(l), 2 * STEP_LIMIT_MS + delayMs, 'date line');
    const release = async () => owner.child.kill('SIGTERM');
    const events = { told: undefined, ran: quiet(ran.then((l) => BigInt(l.text))) };
    return await handOff(delayMs, startedAt, async () => (await keysUnder(ends.owner, `${name}/`)) >= 2, release, events, false);
  } finally {
    owner.child.kill('SIGTERM');
    await Promise.all([owner.end(EXIT_LIMIT_MS), waiter?.end(EXIT_LIMIT_MS)]);
  }
}

/** etcd's Go client (etcdgo -mode handoff), one try: everything timed inside the Go program. */
export async function goHandoff(binary: string, ends: EtcdEnds, delayMs: number): Promise<HandoffSample> {
  const result = await runEtcdGoHandoff({ binary, endpoints: [ends.owner, ends.waiter], delaysMs: [delayMs], sessionTtlSeconds: ETCD_SESSION_TTL_SECONDS });
  const t = result.tries[0];
  if (t === undefined) throw new Error('etcdgo -mode handoff reported no try');
  if (t.error !== undefined) return { delayMs, error: t.error };
  return { delayMs, queuedMs: t.queuedMs, toldMs: t.toldMs, ranMs: t.ranMs, releasedMs: t.unlockMs };
}
