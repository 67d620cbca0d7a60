import test from 'ava';
import { Committer, RETURN_WAIT_MAX_MS } from '../../src/cluster/Committer.js';
import { TICK_MS } from '../../src/cluster/ClusterOptions.js';
import { decodeBatch, LogOp, MAX_BATCH_COMMANDS } from '../../src/cluster/LogCodec.js';
import { ReplicaState } from '../../src/cluster/ReplicaState.js';
import { LIST_ENTRIES_PER_PASS } from '../../src/cluster/GroupCommit.js';
import { mulberry32 } from '../../src/runtime/Random.js';
import { AppendRefusedError, type LogHead, type LogPosition, type ReplicatedLog } from '../../src/cluster/ReplicatedLog.js';
import { StoreContact } from '../../src/cluster/StoreContact.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';

// The committer's promise to clients whose command got no answer: its connection closes only once
// the batch can no longer commit, so "not applied" holds from the close on, whatever node the
// client asks next. The store here is a stand-in whose appends never answer (a cut link).

const COMMIT_TIMEOUT_MS = 2_000;

/** A call that never answers: it rejects when its timeout passes. */
function hanging<T>(vt: VirtualTimers, what: string, timeoutMs: number): Promise<T> {
  return new Promise((_, reject) => vt.after(timeoutMs, () => reject(new Error(`${what}: no answer within ${timeoutMs} ms`))));
}

/** A store whose appends hang until their timeout (or resolve, if told to), as do its seals; counts what was sent. */
function stalledLog(vt: VirtualTimers, lateCommitMs: number, commits = false): { log: ReplicatedLog; attempts: number[]; seals: number[] } {
  const attempts: number[] = [];
  const seals: number[] = [];
  const log = {
    lateCommitMs,
    append(_value: Uint8Array, timeoutMs: number): Promise<LogPosition> {
      attempts.push(vt.now());
      if (commits) return Promise.resolve({ version: 1, revision: 2 });
      return hanging(vt, 'append', timeoutMs);
    },
    seal(timeoutMs: number): Promise<void> {
      seals.push(vt.now());
      return hanging(vt, 'seal', timeoutMs);
    },
  } as unknown as ReplicatedLog;
  return { log, attempts, seals };
}

function committer(vt: VirtualTimers, log: ReplicatedLog, events: string[], applying: () => boolean = () => false): Committer {
  const c = new Committer(
    { nodeName: 'n1', incarnation: 1 },
    COMMIT_TIMEOUT_MS,
    {
      log,
      clock: vt,
      timers: vt,
      random: mulberry32(1),
      logger: { event: (name) => void events.push(`${vt.now()} ${name}`), debug: undefined },
    },
    new StoreContact(),
  );
  vt.every(TICK_MS, () => c.tick(vt.now(), applying()));
  return c;
}

/** Submits a release and resolves with when (virtual time) it was given up, or undefined if answered. */
function submitRelease(vt: VirtualTimers, c: Committer): { givenUpAt: number | undefined; answered: boolean } {
  const outcome: { givenUpAt: number | undefined; answered: boolean } = { givenUpAt: undefined, answered: false };
  c.submit(
    { op: LogOp.Release, key: 'k', index: 'i', owner: 'x' },
    {
      reject: () => (outcome.givenUpAt = vt.now()),
      resolve: () => (outcome.answered = true),
    },
  );
  return outcome;
}

for (const lateCommitMs of [0, 3_000]) {
  test(`a batch that never commits is given up only once its last attempt can no longer land (lateCommitMs ${lateCommitMs})`, async (t) => {
    const vt = new VirtualTimers();
    const { log, attempts } = stalledLog(vt, lateCommitMs);
    const events: string[] = [];
    const outcome = submitRelease(vt, committer(vt, log, events));
    await vt.advance(COMMIT_TIMEOUT_MS + lateCommitMs + 1_000);
    t.false(outcome.answered);
    t.true(attempts.length >= 2, 'the append was retried within the commit timeout');
    t.true(
      attempts.every((at) => at < COMMIT_TIMEOUT_MS),
      'no attempt after the deadline',
    );
    const lastRejection = COMMIT_TIMEOUT_MS; // every attempt's timeout ends by the deadline
    t.not(outcome.givenUpAt, undefined, 'given up in the end');
    t.true(outcome.givenUpAt! >= lastRejection + lateCommitMs, `given up at ${outcome.givenUpAt}, before the fence at ${lastRejection + lateCommitMs}`);
    t.true(outcome.givenUpAt! <= lastRejection + lateCommitMs + TICK_MS, 'and at the first tick after it');
    t.deepEqual(
      events.map((e) => e.split(' ')[1]),
      ['commit-timeout'],
    );
  });
}

test('attempts refused for good need no fence: a round whose attempts were all refused is given up at its deadline; one attempt without an answer among them keeps its fence', async (t) => {
  const lateCommitMs = 3_000;
  for (const sentFirst of [false, true]) {
    const vt = new VirtualTimers();
    const attempts: number[] = [];
    // Refused for good (EtcdLog: no writer lease to be had, or etcd's "no leader" while it elects
    // one); with sentFirst, the first attempt went out and got no answer.
    const log = {
      lateCommitMs,
      append(_value: Uint8Array, timeoutMs: number): Promise<LogPosition> {
        attempts.push(vt.now());
        if (sentFirst && attempts.length === 1) {
          return new Promise((_, reject) => vt.after(timeoutMs, () => reject(new Error(`append: no answer within ${timeoutMs} ms`))));
        }
        return Promise.reject(new AppendRefusedError(attempts.length % 2 === 0 ? 'append not sent: no writer lease' : 'append refused: etcdserver: no leader'));
      },
      seal: (timeoutMs: number) => hanging(vt, 'seal', timeoutMs),
    } as unknown as ReplicatedLog;
    const outcome = submitRelease(vt, committer(vt, log, []));
    await vt.advance(COMMIT_TIMEOUT_MS + lateCommitMs + 1_000);
    t.false(outcome.answered);
    t.true(attempts.length >= 3, 'it kept trying until the deadline');
    t.not(outcome.givenUpAt, undefined);
    if (sentFirst) {
      const firstRejected = attempts[0]! + 500; // the first attempt's timeout (STORE_ATTEMPT_MS)
      t.true(outcome.givenUpAt! >= firstRejected + lateCommitMs, `given up at ${outcome.givenUpAt}: within the sent attempt's fence`);
    } else {
      t.true(outcome.givenUpAt! <= COMMIT_TIMEOUT_MS + TICK_MS, `given up at ${outcome.givenUpAt}, at its deadline`);
    }
  }
});

test('a seal the store confirms ends the fence wait: the round is given up then; a seal that fails leaves the time fence, and seals go on after it until one succeeds', async (t) => {
  const lateCommitMs = 3_000;
  for (const sealAnswers of [true, false]) {
    const vt = new VirtualTimers();
    const seals: Array<{ at: number; timeoutMs: number }> = [];
    let storeBack = false;
    const log = {
      lateCommitMs,
      append: (_value: Uint8Array, timeoutMs: number) => hanging<LogPosition>(vt, 'append', timeoutMs),
      seal(timeoutMs: number): Promise<void> {
        seals.push({ at: vt.now(), timeoutMs });
        // The store is reachable again (for seals only) 700 ms after the deadline, or only after the fence.
        if (vt.now() >= COMMIT_TIMEOUT_MS + 700 && (sealAnswers || storeBack)) return new Promise((resolve) => vt.after(5, resolve));
        return hanging(vt, 'seal', Math.min(timeoutMs, 300));
      },
    } as unknown as ReplicatedLog;
    const events: string[] = [];
    const c = committer(vt, log, events);
    const outcome = submitRelease(vt, c);
    await vt.advance(COMMIT_TIMEOUT_MS + lateCommitMs + 1_000);
    t.false(outcome.answered);
    t.true(
      seals.every((s) => s.at >= COMMIT_TIMEOUT_MS),
      'no seal before the deadline, while attempts may still be sent',
    );
    t.true(seals.length >= 2, `a failed seal is tried again (${seals.length} seals)`);
    if (sealAnswers) {
      t.true(outcome.givenUpAt! >= COMMIT_TIMEOUT_MS + 700 && outcome.givenUpAt! < COMMIT_TIMEOUT_MS + 1_100, `given up at ${outcome.givenUpAt}, once sealed`);
      t.regex(events[0]!, /commit-timeout/);
      continue;
    }
    t.true(outcome.givenUpAt! >= COMMIT_TIMEOUT_MS + lateCommitMs, `given up at ${outcome.givenUpAt}: on the time fence`);
    // Given up unsealed: seals go on, so that an attempt held on the way cannot land later still,
    // one at most every STORE_ATTEMPT_MS (500 ms) while they fail.
    const sealsAtGiveUp = seals.length;
    await vt.advance(2_000);
    t.true(seals.length > sealsAtGiveUp, 'seals go on after the round was given up');
    t.true(seals.length - sealsAtGiveUp <= 2_000 / 500 + 1, `${seals.length - sealsAtGiveUp} seals in 2 s`);
    storeBack = true;
    await vt.advance(2_000);
    const settled = seals.length;
    await vt.advance(2_000);
    t.is(seals.length, settled, 'and stop once one succeeded');
  }
});

test('a node leaving after it gave a round up unsealed makes one last seal before it is gone', async (t) => {
  const vt = new VirtualTimers();
  const { log, seals } = stalledLog(vt, 1_000);
  const c = committer(vt, log, []);
  const outcome = submitRelease(vt, c);
  await vt.advance(COMMIT_TIMEOUT_MS + 1_000 + TICK_MS);
  t.not(outcome.givenUpAt, undefined, 'given up on its time fence: every seal failed');
  const before = seals.length;
  let closed = false;
  void c.close().then(() => (closed = true));
  await vt.advance(1);
  t.is(seals.length, before + 1, 'close() seals once more');
  await vt.advance(2_000);
  t.true(closed, 'and is bounded by that seal');
});

test('a batch the store confirmed is given up at its deadline even if it was not applied here yet (it took effect before the close)', async (t) => {
  const vt = new VirtualTimers();
  const { log } = stalledLog(vt, 3_000, true);
  const outcome = submitRelease(vt, committer(vt, log, []));
  await vt.advance(COMMIT_TIMEOUT_MS + TICK_MS);
  t.not(outcome.givenUpAt, undefined);
  t.true(outcome.givenUpAt! <= COMMIT_TIMEOUT_MS + TICK_MS);
});

test('a batch the store confirmed is not given up while the follower applies in slices (its apply is on its way): once it is idle, it is', async (t) => {
  const vt = new VirtualTimers();
  const { log } = stalledLog(vt, 3_000, true);
  let applying = true;
  const outcome = submitRelease(
    vt,
    committer(vt, log, [], () => applying),
  );
  await vt.advance(3 * COMMIT_TIMEOUT_MS);
  t.is(outcome.givenUpAt, undefined, 'kept past its deadline while the follower was busy');
  applying = false;
  await vt.advance(TICK_MS);
  t.not(outcome.givenUpAt, undefined);
});

test('a node leaving with a batch in flight closes its connections only once that batch can no longer land', async (t) => {
  const vt = new VirtualTimers();
  const { log } = stalledLog(vt, 3_000);
  const c = committer(vt, log, []);
  const inFlight = submitRelease(vt, c);
  await vt.advance(100); // the first attempt is out
  const queued = submitRelease(vt, c);
  let closedAt: number | undefined;
  void c.close().then(() => (closedAt = vt.now()));
  await vt.advance(1);
  t.is(queued.givenUpAt, 100, 'a command never sent fails at once');
  await vt.advance(10_000);
  t.not(inFlight.givenUpAt, undefined);
  t.true(inFlight.givenUpAt! >= 500 + 3_000, `the first attempt's timeout (500 ms) plus lateCommitMs; given up at ${inFlight.givenUpAt}`);
  // Then one last seal (it gets no answer here), bounded by its own timeout.
  t.true(closedAt! >= inFlight.givenUpAt! && closedAt! <= inFlight.givenUpAt! + 1_000 + TICK_MS, `closed at ${closedAt}`);
});

test('rounds queued behind a round that is given up fail unsent: later pipelined commands never commit after their connection closed', async (t) => {
  const vt = new VirtualTimers();
  const { log, attempts } = stalledLog(vt, 1_000);
  const c = committer(vt, log, []);
  const first = submitRelease(vt, c);
  await vt.advance(100); // the first round is out; the next command waits for it
  const second = submitRelease(vt, c);
  const sentBefore = attempts.length;
  await vt.advance(COMMIT_TIMEOUT_MS + 1_000 + 1_000);
  t.not(first.givenUpAt, undefined);
  t.is(second.givenUpAt, first.givenUpAt, 'given up with the round before it');
  t.false(second.answered);
  t.true(
    attempts.every((at) => at < COMMIT_TIMEOUT_MS),
    'nothing of the second round was ever sent',
  );
  t.true(attempts.length >= sentBefore);
});

test('rounds queued behind a round still within its fence are not failed before it: a connection with commands in both must not close while its earlier one can still commit', async (t) => {
  const vt = new VirtualTimers();
  const lateCommitMs = 3_000;
  const { log } = stalledLog(vt, lateCommitMs);
  const c = committer(vt, log, []);
  const inFlight = submitRelease(vt, c);
  await vt.advance(100); // the first round is out; what follows queues behind it
  // More than one batch's worth queues: two rounds wait behind the one in flight.
  const queued = Array.from({ length: MAX_BATCH_COMMANDS + 1 }, () => submitRelease(vt, c));
  await vt.advance(COMMIT_TIMEOUT_MS + lateCommitMs + 1_000);
  t.not(inFlight.givenUpAt, undefined);
  const earliest = Math.min(...queued.map((q) => q.givenUpAt ?? Number.POSITIVE_INFINITY));
  t.true(earliest >= inFlight.givenUpAt!, `a queued command was given up at ${earliest}, before the round in flight (${inFlight.givenUpAt})`);
});

// Waiting for the answered: a round queued behind one that was just answered is held until that
// round's clients come back (or for as long as that round took, at most RETURN_WAIT_MAX_MS), so
// the two cohorts of busy clients merge into one round instead of taking turns.

const BARRIER_MS = 4;

/** A store whose read barriers answer `roundMs` after they are sent; records when each was sent. */
function barrierLog(vt: VirtualTimers, roundMs = BARRIER_MS): { log: ReplicatedLog; sentAt: number[] } {
  const sentAt: number[] = [];
  const log = {
    lateCommitMs: 0,
    head(): Promise<LogHead> {
      sentAt.push(vt.now());
      return new Promise((resolve) => vt.after(roundMs, () => resolve({ version: 0, revision: 0, storeRevision: 1 })));
    },
  } as unknown as ReplicatedLog;
  return { log, sentAt };
}

/** A committer over barrierLog, and `poll()`: one client's read, answered with the clock time it was answered at. */
function polled(roundMs = BARRIER_MS): { vt: VirtualTimers; sentAt: number[]; answers: number[]; poll: () => void } {
  const vt = new VirtualTimers();
  const { log, sentAt } = barrierLog(vt, roundMs);
  const c = committer(vt, log, []);
  const answers: number[] = [];
  return { vt, sentAt, answers, poll: () => void c.read(() => answers.push(vt.now())) };
}

test('a round queued behind an answered one waits for the answered clients to come back, then carries them too', async (t) => {
  const { vt, sentAt, answers, poll } = polled();
  poll();
  poll(); // round 1: two clients, sent at 0, answered at 4
  await vt.advance(1);
  poll(); // round 2 gathers behind it
  await vt.advance(BARRIER_MS); // t = 5: round 1 answered 1 ms ago
  t.deepEqual(sentAt, [0], 'round 2 is held for the two clients round 1 answered');
  poll();
  t.deepEqual(sentAt, [0], 'one came back; one more is expected');
  poll();
  await vt.advance(0);
  t.deepEqual(sentAt, [0, 5], 'both came back: round 2 goes at once');
  await vt.advance(BARRIER_MS);
  t.deepEqual(answers, [4, 4, 9, 9, 9], 'and answers all three together');
});

test('the wait for answered clients that do not come back lasts as long as the answered round took, at most RETURN_WAIT_MAX_MS', async (t) => {
  for (const [roundMs, heldMs] of [
    [BARRIER_MS, BARRIER_MS],
    [RETURN_WAIT_MAX_MS * 3, RETURN_WAIT_MAX_MS],
  ] as const) {
    const { vt, sentAt, poll } = polled(roundMs);
    poll();
    await vt.advance(1);
    poll(); // queued behind round 1, whose client never comes back
    await vt.advance(roundMs + RETURN_WAIT_MAX_MS * 2);
    t.deepEqual(sentAt, [0, roundMs + heldMs], `a ${roundMs} ms round holds the next for ${heldMs} ms`);
  }
});

test('a lone client is never held: its next command is the one the wait expected', async (t) => {
  const { vt, sentAt, poll } = polled();
  poll();
  await vt.advance(BARRIER_MS + 2);
  poll();
  await vt.advance(0);
  t.deepEqual(sentAt, [0, BARRIER_MS + 2]);
});

const IGNORED = { resolve: () => {}, reject: () => {} };

test('the batch in flight, and only it, is known by its header: the follower takes its commands instead of decoding them', async (t) => {
  const vt = new VirtualTimers();
  const { log } = stalledLog(vt, 0);
  const c = committer(vt, log, []);
  const first = { op: LogOp.Release, key: 'k', index: 'i', owner: 'x' } as const;
  const second = { op: LogOp.Renew, key: 'k', index: 'i', owner: 'y' } as const;
  c.submit(first, IGNORED);
  c.submit(second, IGNORED);
  t.is(c.ownCommands({ proposer: 'n1', incarnation: 1, seq: 1 }), undefined, 'nothing is in flight before the round is sent');
  await vt.advance(0);
  t.deepEqual(c.ownCommands({ proposer: 'n1', incarnation: 1, seq: 1 })?.commands, [first, second]);
  c.submit(first, IGNORED); // the next round gathers meanwhile
  for (const other of [
    { proposer: 'n1', incarnation: 1, seq: 2 },
    { proposer: 'n1', incarnation: 2, seq: 1 },
    { proposer: 'n2', incarnation: 1, seq: 1 },
  ]) {
    t.is(c.ownCommands(other), undefined, JSON.stringify(other));
  }
});

test('a command read before it was submitted (it waited in its connection) is given up a commit timeout after it was read, and no attempt is sent after that', async (t) => {
  const vt = new VirtualTimers();
  const { log, attempts } = stalledLog(vt, 0);
  const c = committer(vt, log, []);
  await vt.advance(1_500);
  let givenUpAt: number | undefined;
  // Read at 500, decoded and submitted at 1,500: its deadline is 500 + the commit timeout.
  c.submit(
    { op: LogOp.Release, key: 'k', index: 'i', owner: 'x' },
    { reject: () => (givenUpAt = vt.now()), resolve: () => t.fail('never committed') },
    undefined,
    500,
  );
  await vt.advance(COMMIT_TIMEOUT_MS + 1_000);
  t.true(
    attempts.every((at) => at < 500 + COMMIT_TIMEOUT_MS),
    `attempts at ${attempts.join(', ')}`,
  );
  t.true(givenUpAt !== undefined && givenUpAt <= 500 + COMMIT_TIMEOUT_MS + TICK_MS, `given up at ${givenUpAt}`);
});

test('lists asked for at once are answered a pass at a time, each pass within its budget of list entries, in the order they came', async (t) => {
  const vt = new VirtualTimers();
  let heads = 0;
  const log = {
    lateCommitMs: 0,
    // Each read barrier takes a millisecond: one pass per millisecond of virtual time.
    head: (): Promise<LogHead> => {
      heads++;
      return new Promise((resolve) => vt.after(1, () => resolve({ version: 0, revision: 0, storeRevision: 1 })));
    },
  } as unknown as ReplicatedLog;
  const c = committer(vt, log, []);
  /** The list answered, and the read barrier (pass) it was answered in. */
  const answered: Array<[number, number]> = [];
  const perList = Math.ceil(LIST_ENTRIES_PER_PASS / 2) + 1;
  const lists = Array.from({ length: 7 }, (_, i) =>
    c.read(
      () => {
        answered.push([i, heads]);
        return i;
      },
      undefined,
      () => perList,
    ),
  );
  await vt.advance(100);
  t.deepEqual(await Promise.all(lists), [0, 1, 2, 3, 4, 5, 6]);
  t.deepEqual(
    answered,
    [
      [0, 1],
      [1, 1],
      [2, 2],
      [3, 2],
      [4, 3],
      [5, 3],
      [6, 4],
    ],
    'in order, two lists (their budget) per pass',
  );
  t.is(heads, 4, 'one read barrier per pass');
});

test("a sequencer's word that its batch committed is held when the batch applied here first, refuted when the log passes it without the batch, and never moves the known head", async (t) => {
  for (const order of ['applied-first', 'word-first', 'lie'] as const) {
    const vt = new VirtualTimers();
    const contact = new StoreContact();
    const verdicts: boolean[] = [];
    let appends = 0;
    let sent: Uint8Array | undefined;
    let answerAppend: (() => void) | undefined;
    const committer = new Committer(
      { nodeName: 'n1', incarnation: 1 },
      COMMIT_TIMEOUT_MS,
      {
        log: { lateCommitMs: 1_000 } as unknown as ReplicatedLog,
        router: {
          append: (value) => {
            appends++;
            sent = value;
            return new Promise((resolve) => {
              answerAppend = () =>
                resolve({ confirmed: false, position: { version: order === 'lie' ? 1_000 : 1, revision: 5 }, settle: (held) => verdicts.push(held) });
            });
          },
        },
        clock: vt,
        timers: vt,
        random: mulberry32(1),
        logger: { event: () => {}, debug: undefined },
      },
      contact,
    );
    let answered = false;
    committer.submit({ op: LogOp.ReleaseAll, owner: 'o' }, { resolve: () => (answered = true), reject: () => {} });
    await vt.advance(1);
    t.is(appends, 1);
    const state = new ReplicaState(vt);
    const applyOwn = (version: number): void => {
      committer.applyBatch(state, decodeBatch(sent!), { version, revision: 5, value: sent! }, { place: 0, first: true });
      committer.progressed(version);
    };
    if (order === 'applied-first') {
      applyOwn(1); // the watch brings the batch before the sequencer's word
      answerAppend!();
      await vt.advance(1);
      t.true(answered);
      t.deepEqual(verdicts, [true], 'held: the batch was applied');
    } else if (order === 'word-first') {
      answerAppend!();
      await vt.advance(1);
      applyOwn(1);
      await vt.advance(1);
      t.true(answered);
      t.deepEqual(verdicts, [true]);
    } else {
      answerAppend!();
      await vt.advance(1);
      // Another node's batch at version 1; the lie said 1,000: not refuted until the wait runs out.
      state.apply({ proposer: 'n2', incarnation: 1, seq: 1, commands: [] }, { version: 1, revision: 4 });
      committer.progressed(1);
      await vt.advance(600);
      t.deepEqual(verdicts, [false], 'refuted once the attempt’s wait passed');
      t.is(appends, 2, 'and the round tried again');
    }
    t.is(contact.knownHead, 0, 'a sequencer’s word is not etcd’s: the known head stays');
  }
});
