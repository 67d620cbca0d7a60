import test, { type ExecutionContext } from 'ava';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { FakeClock } from '../doubles/FakeClock.js';
import { LocalLockService } from '../../src/locks/LocalLockService.js';
import { idleTimers } from '../doubles/idleTimers.js';
import { Later } from '../../src/locks/Later.js';
import type { Answer, LockService } from '../../src/locks/LockService.js';
import { Command } from '../../src/protocol/constants.js';
import type { Request } from '../../src/protocol/messages.js';
import { AllowList } from '../../src/server/AllowList.js';
import { MAX_OUTSTANDING_ANSWERS } from '../../src/server/Connection.js';
import { LockServer } from '../../src/server/LockServer.js';
import { silentLogger, type LogFields, type Logger } from '../../src/runtime/Logger.js';
import { bounded } from '../helpers/bounded.js';
import { CLIENT_WAIT_MS, RawClient } from '../helpers/rawClient.js';
import { bytes, frames, hex, readReply, req } from '../helpers/wire.js';

/** How a service that answers later hands its answers over: promises, or Laters (as a cluster node does). */
type AnswerKind = 'promise' | 'later';
const KINDS: readonly AnswerKind[] = ['promise', 'later'];

/**
 * The table answers at once; a replicated core will answer later. This one answers every command
 * on a later turn of the event loop, reading the table only then, as a remote core would.
 */
function later(local: LocalLockService, kind: AnswerKind = 'promise'): LockService {
  const defer = <T>(answer: () => T): Later<T> | Promise<T> => {
    if (kind === 'promise') return new Promise((resolve) => setImmediate(() => resolve(answer())));
    const settled = new Later<T>();
    setImmediate(() => settled.resolve(answer()));
    return settled;
  };
  return {
    findOwner: (key, index) => defer(() => local.findOwner(key, index)),
    request: (r, allowCreate) => defer(() => local.request(r, allowCreate)),
    requestFenced: (r, allowCreate) => defer(() => local.requestFenced(r, allowCreate)),
    // A wait is answered later already; these two pass straight through.
    acquire: (r, allowCreate, waitMs) => local.acquire(r, allowCreate, waitMs),
    awaitLoss: (key, index, owner) => local.awaitLoss(key, index, owner),
    queues: (key, limit) => defer(() => local.queues(key, limit)),
    get waiting() {
      return local.waiting;
    },
    fence: (key, index, owner) => defer(() => local.fence(key, index, owner)),
    location: (key, index, owner) => defer(() => local.location(key, index, owner)),
    renew: (key, index, owner) => defer(() => local.renew(key, index, owner)),
    release: (key, index, owner) => defer(() => local.release(key, index, owner)),
    releaseKey: (key, owner) => defer(() => local.table.releaseKey(key, owner)),
    releaseAll: (owner) => defer(() => local.table.releaseAll(owner)),
    list: (key, limit) => defer(() => local.list(key, limit)),
    counts: () => local.counts(),
    drainCounts: () => local.drainCounts(),
    snapshot: () => local.snapshot(),
    highestToken: () => local.highestToken(),
    restore: (saved, highestToken) => local.restore(saved, highestToken),
    close: () => local.close(),
  };
}

/** A server on loopback around `service`, stopped when the test ends; and a greeted client of it. */
async function serve(
  t: ExecutionContext,
  service: LockService,
  { clock = new FakeClock(), logger = silentLogger, onDrained }: { clock?: FakeClock; logger?: Logger; onDrained?: () => void } = {},
): Promise<{ server: LockServer; client: RawClient }> {
  const server = new LockServer({
    service,
    allowList: AllowList.parse('127.0.0.1\n', 'test hosts'),
    maxConnections: 4,
    frameTimeoutMs: 10_000,
    clock,
    logger,
    onDrained,
  });
  const { port } = await server.listen(0, '127.0.0.1');
  t.teardown(async () => {
    await server.stopServing();
    server.closeConnections();
    await server.whenAllClosed(1_000);
  });
  const client = await RawClient.connect(t, { port });
  t.deepEqual([...(await client.read(1))], [1], 'greeted');
  return { server, client };
}

async function repliesFrom(t: ExecutionContext, service: LockService, batch: Buffer): Promise<Buffer> {
  const { client } = await serve(t, service);
  client.sendAndEnd(batch);
  return client.readUntilClose();
}

for (const kind of KINDS) {
  test(`a service that answers later gets the same replies, in the same order, as one that answers at once (answered with ${kind}s)`, async (t) => {
    const batch = frames(
      req.findOwner('k', '1'),
      req.request('k', '1', 'alice', { ttl: 30, ttw: 60, priority: 3 }),
      req.request('k', '1', 'bob', { ttl: 30, ttw: 60, priority: 1 }),
      req.request('k', '1', 'carol', { ttl: 30, ttw: 60, priority: 9 }),
      req.location('k', '1', 'bob'),
      req.renew('k', '1', 'bob'),
      req.list('k'),
      req.release('k', '1', 'alice'),
      req.findOwner('k', '1'),
      req.request('k', '2', 'bob'),
      req.release('k', '*', 'bob'),
      req.releaseAll('carol'),
      req.list('k'),
    );
    const atOnce = await repliesFrom(t, new LocalLockService(new FakeClock(), idleTimers), batch);
    const deferred = await repliesFrom(t, later(new LocalLockService(new FakeClock(), idleTimers), kind), batch);
    t.true(atOnce.length > 40, `a full set of replies (${atOnce.length} bytes)`);
    t.deepEqual(deferred.toString('hex'), atOnce.toString('hex'));
  });
}

for (const kind of KINDS) {
  test(`fence (0x09) and request with fence (0x0A) answered later give the same bytes as answered at once (answered with ${kind}s)`, async (t) => {
    const fenced = (owner: string): Request => ({ command: Command.RequestFenced, key: 'k', index: '1', owner, ttl: 30, ttw: 60, priority: 0 });
    const fence = (owner: string): Request => ({ command: Command.Fence, key: 'k', index: '1', owner });
    const batch = frames(
      fenced('alice'),
      fenced('bob'),
      fence('alice'),
      fence('bob'),
      fenced('alice'),
      req.release('k', '1', 'alice'),
      fence('bob'),
      fenced('bob'),
    );
    const atOnce = await repliesFrom(t, new LocalLockService(new FakeClock(), idleTimers), batch);
    const deferred = await repliesFrom(t, later(new LocalLockService(new FakeClock(), idleTimers), kind), batch);
    // alice is granted token 1, renews it; bob waits with 0, is promoted to token 2 and renews it.
    const expected = [[0, 1, 0, 0, 0, 0, 0, 0, 0, 1], [0, 2, ...new Array<number>(8).fill(0)], [0, 0, 0, 0, 0, 0, 0, 1], new Array<number>(8).fill(0)];
    const after = [
      [0, 1, 0, 0, 0, 0, 0, 0, 0, 1],
      [0, 1],
      [0, 0, 0, 0, 0, 0, 0, 2],
      [0, 1, 0, 0, 0, 0, 0, 0, 0, 2],
    ];
    t.is(hex(atOnce), hex([...expected, ...after].flat()));
    t.is(hex(deferred), hex(atOnce));
  });
}

/** One command submitted to a GatedService: its answer is known, but handed over only when the test says. */
interface Submission {
  readonly command: string;
  settled: boolean;
  settle(): void;
  fail(error: Error): void;
}

/**
 * Answers each command with a promise, or a Later, that the test settles (in any order, or never). The answer is
 * worked out from the table at submission, as a replicated core applies commands in log order;
 * only its delivery waits.
 */
class GatedService {
  readonly submissions: Submission[] = [];
  readonly service: LockService;
  private waiters: Array<{ readonly count: number; readonly resolve: () => void }> = [];

  constructor(
    kind: AnswerKind,
    readonly local = new LocalLockService(new FakeClock(), idleTimers),
  ) {
    const submit = <T>(command: string, answer: T, resolve: (value: T) => void, reject: (error: Error) => void): void => {
      const submission: Submission = {
        command,
        settled: false,
        settle: () => {
          submission.settled = true;
          resolve(answer);
        },
        fail: (error) => {
          submission.settled = true;
          reject(error);
        },
      };
      this.submissions.push(submission);
      this.waiters = this.waiters.filter((w) => (this.submissions.length >= w.count ? (w.resolve(), false) : true));
    };
    const gate =
      <A extends unknown[], T>(command: string, run: (...args: A) => Answer<T>) =>
      (...args: A): Later<T> | Promise<T> => {
        const answer = run(...args) as T;
        if (kind === 'promise') return new Promise<T>((resolve, reject) => submit(command, answer, resolve, reject));
        const settled = new Later<T>();
        submit(
          command,
          answer,
          (value) => settled.resolve(value),
          (error) => settled.reject(error),
        );
        return settled;
      };
    this.service = {
      findOwner: gate('find-owner', (key, index) => local.findOwner(key, index)),
      request: gate('request', (r, allowCreate) => local.request(r, allowCreate)),
      requestFenced: gate('request-fenced', (r, allowCreate) => local.requestFenced(r, allowCreate)),
      acquire: (r, allowCreate, waitMs) => local.acquire(r, allowCreate, waitMs),
      awaitLoss: (key, index, owner) => local.awaitLoss(key, index, owner),
      queues: gate('queues', (key, limit) => local.queues(key, limit)),
      get waiting() {
        return local.waiting;
      },
      fence: gate('fence', (key, index, owner) => local.fence(key, index, owner)),
      location: gate('location', (key, index, owner) => local.location(key, index, owner)),
      renew: gate('renew', (key, index, owner) => local.renew(key, index, owner)),
      release: gate('release', (key, index, owner) => local.release(key, index, owner)),
      releaseKey: gate('release-key', (key, owner) => local.releaseKey(key, owner)),
      releaseAll: gate('release-all', (owner) => local.releaseAll(owner)),
      list: gate('list', (key, limit) => local.list(key, limit)),
      counts: () => local.counts(),
      drainCounts: () => local.drainCounts(),
      snapshot: () => local.snapshot(),
      highestToken: () => local.highestToken(),
      restore: (saved, highestToken) => local.restore(saved, highestToken),
      close: () => local.close(),
    };
  }

  /** Resolves once `count` commands in all have been submitted (bounded). */
  submitted(count: number): Promise<void> {
    const reached = new Promise<void>((resolve) => {
      if (this.submissions.length >= count) resolve();
      else this.waiters.push({ count, resolve });
    });
    return bounded(reached, CLIENT_WAIT_MS, () => `${count} submissions (have ${this.submissions.length})`);
  }
}

/** Events logged, by name and fields. */
function recordingLogger(): { logger: Logger; events: Array<{ name: string; fields: LogFields }> } {
  const events: Array<{ name: string; fields: LogFields }> = [];
  return { logger: { event: (name, fields = {}) => events.push({ name, fields }), debug: undefined }, events };
}

const THREE_REQUESTS = frames(
  req.request('k', '1', 'alice', { ttl: 30 }),
  req.request('k', '1', 'bob', { ttl: 30 }),
  req.request('k', '1', 'carol', { ttl: 30 }),
);

for (const kind of KINDS) {
  test(`pipelined requests are all submitted before the first answer settles, then answered in order (answered with ${kind}s)`, async (t) => {
    const gated = new GatedService(kind);
    const { client } = await serve(t, gated.service);
    client.send(THREE_REQUESTS);
    await gated.submitted(3);
    t.deepEqual(
      gated.submissions.map((s) => s.settled),
      [false, false, false],
      'requests 2 and 3 reached the service while answer 1 was outstanding',
    );
    for (const submission of gated.submissions) submission.settle();
    t.is(hex(await client.read(6)), hex(bytes(0, 1, 0, 2, 0, 3)));
  });
}

for (const kind of KINDS) {
  test(`answers settling out of order still give replies in request order, each timed from submission to answer (answered with ${kind}s)`, async (t) => {
    const gated = new GatedService(kind);
    const clock = new FakeClock();
    const { server, client } = await serve(t, gated.service, { clock });
    const timed: Array<[number, number]> = [];
    server.commandObserver = { commandDone: (command, elapsedMs) => timed.push([command, elapsedMs]) };
    client.send(frames(req.findOwner('k', '1'), req.request('k', '1', 'alice', { ttl: 30 }), req.list('k')));
    await gated.submitted(3);
    const [owner, request, list] = gated.submissions;
    clock.advance(5);
    list!.settle();
    await nextTurn();
    clock.advance(10);
    request!.settle();
    await nextTurn();
    clock.advance(20);
    owner!.settle();
    t.is(hex(await client.read(1)), hex(bytes(0)), 'find owner: free when it was asked');
    t.is(await readReply(client, Command.Request), 1);
    t.like(await readReply(client, Command.List), [{ index: '1', owner: 'alice', isOwner: true }]);
    t.deepEqual(
      [...timed].sort((a, b) => a[0] - b[0]),
      [
        [Command.FindOwner, 35],
        [Command.Request, 15],
        [Command.List, 5],
      ],
    );
  });
}

for (const kind of KINDS) {
  test(`a rejected answer closes the connection after the replies before it, and is logged (answered with ${kind}s)`, async (t) => {
    const gated = new GatedService(kind);
    const { logger, events } = recordingLogger();
    const { client } = await serve(t, gated.service, { logger });
    client.send(THREE_REQUESTS);
    await gated.submitted(3);
    const [first, second, third] = gated.submissions;
    third!.settle();
    second!.fail(new Error('commit timed out'));
    first!.settle();
    const received = await client.readUntilClose();
    t.is(hex(received), hex(bytes(0, 1)), 'only the reply before the failed one');
    t.like(events.find((e) => e.name === 'connection-error')?.fields, { command: 'request', error: 'commit timed out' });
  });
}

for (const kind of KINDS) {
  test(`at most ${MAX_OUTSTANDING_ANSWERS} answers are outstanding per connection; each settled answer lets one more in (answered with ${kind}s)`, async (t) => {
    const gated = new GatedService(kind);
    const { client } = await serve(t, gated.service);
    const sent = MAX_OUTSTANDING_ANSWERS + 500;
    client.send(frames(...Array.from({ length: sent }, () => req.findOwner('k', '1'))));
    await gated.submitted(MAX_OUTSTANDING_ANSWERS);
    t.is(gated.submissions.length, MAX_OUTSTANDING_ANSWERS, 'no request beyond the limit was submitted');
    gated.submissions[0]!.settle();
    await gated.submitted(MAX_OUTSTANDING_ANSWERS + 1);
    t.is(gated.submissions.length, MAX_OUTSTANDING_ANSWERS + 1, 'one answer out, one request in');
    t.is(hex(await client.read(1)), '00');
    for (let settled = 1; settled < sent; settled++) {
      await gated.submitted(Math.min(sent, settled + MAX_OUTSTANDING_ANSWERS));
      gated.submissions[settled]!.settle();
    }
    t.is((await client.read(sent - 1)).length, sent - 1, 'every request answered in the end');
  });
}

for (const kind of KINDS) {
  test(`shutdown waits for the answers to requests already received, and delivers them (answered with ${kind}s)`, async (t) => {
    const gated = new GatedService(kind);
    const { server, client } = await serve(t, gated.service);
    client.send(THREE_REQUESTS);
    await gated.submitted(3);
    let stopped = false;
    const stopping = server.stopServing().then(() => (stopped = true));
    await nextTurn();
    t.false(stopped, 'still waiting for three answers');
    for (const submission of gated.submissions) submission.settle();
    await bounded(stopping, CLIENT_WAIT_MS, 'stopServing');
    server.closeConnections();
    t.is(hex(await client.readUntilClose()), hex(bytes(0, 1, 0, 2, 0, 3)));
  });
}

for (const kind of KINDS) {
  test(`drain mode still learns of removals answered later, and stats counts itself (answered with ${kind}s)`, async (t) => {
    let drained!: () => void;
    const whenDrained = new Promise<void>((resolve) => (drained = resolve));
    const { server, client } = await serve(t, later(new LocalLockService(new FakeClock(), idleTimers), kind), { onDrained: () => drained() });
    client.send(frames(req.request('k', '1', 'alice', { ttl: 30 })));
    t.is(await readReply(client, Command.Request), 1);
    server.startDrain();
    client.send(frames(req.stats(), req.release('k', '1', 'alice')));
    t.like(await readReply(client, Command.Stats), { statsRequests: 1, releases: 0, owners: 1 });
    t.is(await readReply(client, Command.Release), 1);
    await bounded(whenDrained, CLIENT_WAIT_MS, 'onDrained');
  });
}
