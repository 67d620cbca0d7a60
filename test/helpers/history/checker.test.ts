import test from 'ava';
import { checkAvailability, checkEarlyExpiry, checkHistory, checkLost, checkMutualExclusion, checkStaleReads, longestSilence, ownerships } from './checker.js';
import type { Op } from './history.js';

// Hand-made histories for the nemesis checker: each check must pass the right ones and fail the
// wrong ones. Times are ms; TTL and TTW are seconds as on the wire.

type Partial = Omit<Op, 'id' | 'node'> & { node?: string };

function history(...ops: Partial[]): Op[] {
  return ops.map((o, id) => ({ node: 'n1', ...o, id }));
}

const grant = (client: string, sent: number, replied: number | undefined, ttl = 3, reply: number | undefined = 1): Partial => ({
  client,
  cmd: 'request',
  key: 'k',
  index: '0',
  owner: client,
  ttl,
  ttw: 2,
  sent,
  ...(replied === undefined ? { failure: 'closed' } : { replied, reply }),
});
const location = (client: string, sent: number, replied: number, reply: number): Partial => ({
  client,
  cmd: 'location',
  key: 'k',
  index: '0',
  owner: client,
  sent,
  replied,
  reply,
});
const release = (client: string, sent: number, replied?: number): Partial => ({
  client,
  cmd: 'release',
  key: 'k',
  index: '0',
  owner: client,
  sent,
  ...(replied === undefined ? { failure: 'timeout' } : { replied, reply: 1 }),
});
const renew = (client: string, sent: number, replied?: number, reply = true): Partial => ({
  client,
  cmd: 'renew',
  key: 'k',
  index: '0',
  owner: client,
  sent,
  ...(replied === undefined ? { failure: 'closed' } : { replied, reply }),
});
const owner = (client: string, sent: number, replied: number, reply: string): Partial => ({ client, cmd: 'owner', key: 'k', index: '0', sent, replied, reply });
const list = (client: string, sent: number, replied: number, entries: Array<[string, boolean]>): Partial => ({
  client,
  cmd: 'list',
  key: 'k',
  sent,
  replied,
  reply: entries.map(([o, isOwner]) => ({ index: '0', owner: o, isOwner })),
});

test('S1 passes: the second owner is told so after the first released', (t) => {
  t.deepEqual(checkMutualExclusion(history(grant('a', 0, 10), release('a', 1000, 1020), grant('b', 20, 30, 3, 2), location('b', 1100, 1110, 1))), []);
});

test("S1 passes: the second owner is told so after the first one's last confirmed renewal + TTL", (t) => {
  t.deepEqual(checkMutualExclusion(history(grant('a', 0, 10), renew('a', 1000, 1010), grant('b', 4000, 4010, 3, 2), location('b', 4100, 4110, 1))), []);
});

test('S1 fails: two clients told they own one entry at once, with the pair and its times', (t) => {
  const violations = checkMutualExclusion(history(grant('a', 0, 10), grant('b', 500, 2000)));
  t.is(violations.length, 1);
  t.is(violations[0]!.check, 'S1');
  t.regex(violations[0]!.message, /k\/0: a owns from 10 .* to 3000.*b owns from 2000/s);
  t.deepEqual(violations[0]!.ops.slice(0, 2), [0, 1]);
});

test('S1 fails: a confirmed renewal extends the interval (TTL from its send)', (t) => {
  t.is(checkMutualExclusion(history(grant('a', 0, 10), renew('a', 2000, 2010), grant('b', 3990, 4000))).length, 1);
});

test('S1 passes: a waiter told 1 after its last confirmed request + TTL does not count as owner (it cannot know when it was promoted)', (t) => {
  t.deepEqual(checkMutualExclusion(history(grant('a', 0, 10), grant('b', 50, 60, 3, 2), location('b', 3100, 3110, 1), grant('a', 3200, 3210))), []);
});

test('S1 passes: a renewal that was never answered does not extend the interval', (t) => {
  t.deepEqual(checkMutualExclusion(history(grant('a', 0, 10), renew('a', 2000), grant('b', 3990, 4000))), []);
  t.is(checkMutualExclusion(history(grant('a', 0, 10), renew('a', 2000), grant('b', 2890, 2900))).length, 1, 'but the confirmed grant still counts');
});

test('S1 fails: TTL 0 never ends, whoever is told later', (t) => {
  t.is(checkMutualExclusion(history(grant('a', 0, 10, 0), grant('b', 99_000, 99_010, 3, 2), owner('b', 100_000, 100_010, 'b'))).length, 1);
});

test('S1 fails: a release that got no reply, then a new grant, then another owner (a late commit of the release)', (t) => {
  const h = history(
    grant('a', 0, 10),
    release('a', 1000),
    release('a', 5000, 5010),
    grant('a', 6000, 6010),
    grant('b', 6500, 6600, 3, 2),
    location('b', 7000, 7010, 1),
  );
  const violations = checkMutualExclusion(h);
  t.is(violations.length, 1);
  t.regex(violations[0]!.message, /a owns from 6010 .* to 9000/);
});

test('S1: evidence by 0x01 naming the client and by 0x07 flagging it; a release send ends the interval', (t) => {
  const h = history(grant('a', 0, 10, 3, 2), owner('a', 100, 110, 'a'), list('a', 200, 210, [['a', true]]), release('a', 300, 310));
  t.deepEqual(
    ownerships(h).map((o) => [o.from, o.to]),
    [
      [110, 300],
      [210, 300],
    ],
  );
});

test('S1: a waiter promoted after its wait ran out keeps the TTL of its last confirmed request (the client side of bug c)', (t) => {
  // b waited (TTW 2 s), was told 1 at 2500 (its TTL 3 s runs from its request at 0): a must not own before 3000.
  const h = history(grant('a', 0, 10, 3, 1), release('a', 100, 110), grant('b', 0, 5, 3, 2), location('b', 2400, 2500, 1), grant('a', 2600, 2700));
  t.is(checkMutualExclusion(h).length, 1);
});

test("stale read fails: after a's release was answered, a read sent later names a as owner", (t) => {
  const violations = checkStaleReads(history(grant('a', 0, 10), release('a', 1000, 1010), owner('c', 1200, 1210, 'a')));
  t.is(violations.length, 1);
  t.is(violations[0]!.check, 'stale-read');
});

test('stale read passes: a read sent before the release was answered, or after a asked again', (t) => {
  t.deepEqual(checkStaleReads(history(grant('a', 0, 10), release('a', 1000, 1010), owner('c', 900, 1020, 'a'))), []);
  t.deepEqual(checkStaleReads(history(grant('a', 0, 10), release('a', 1000, 1010), grant('a', 1100, 1110), owner('c', 1200, 1210, 'a'))), []);
});

test('stale read passes: a request with no reply may take effect later (judged by S1, not here)', (t) => {
  t.deepEqual(checkStaleReads(history(grant('a', 0, undefined), release('a', 1000, 1010), list('c', 1200, 1210, [['a', true]]))), []);
});

test("stale read fails: after a's own 0x03 answered 0 (gone), a 0x07 sent later flags it as owner", (t) => {
  t.is(checkStaleReads(history(grant('a', 0, 10), location('a', 4000, 4010, 0), list('c', 4100, 4110, [['a', true]]))).length, 1);
});

test('early expiry fails: an owner reported absent before its confirmed renewal + TTL', (t) => {
  const violations = checkEarlyExpiry(history(grant('a', 0, 5), location('a', 1000, 1010, 0)));
  t.is(violations.length, 1);
  t.is(violations[0]!.check, 'early-expiry');
  t.is(checkEarlyExpiry(history(grant('a', 0, 5), owner('c', 1000, 1010, 'b'))).length, 1);
  t.is(checkEarlyExpiry(history(grant('a', 0, 5), owner('c', 1000, 1010, ''))).length, 1);
});

test('early expiry passes: after TTL, or after a release it sent', (t) => {
  t.deepEqual(checkEarlyExpiry(history(grant('a', 0, 5), location('a', 3100, 3110, 0))), []);
  t.deepEqual(checkEarlyExpiry(history(grant('a', 0, 5), release('a', 500), location('a', 1000, 1010, 0))), []);
});

test('early expiry: a waiter counts the smaller of TTW and TTL, and may see another owner', (t) => {
  const waiting = grant('a', 0, 5, 3, 2);
  t.is(checkEarlyExpiry(history(waiting, list('c', 1500, 1510, [['b', true]]))).length, 1);
  t.deepEqual(checkEarlyExpiry(history(waiting, list('c', 2100, 2110, [['b', true]]))), []);
  t.deepEqual(checkEarlyExpiry(history(waiting, owner('c', 500, 510, 'b'))), []);
});

test('lost fails: a TTL-0 grant never released is missing from a final read; passes when there or released', (t) => {
  const violations = checkLost(history(grant('a', 0, 10, 0), owner('final', 50_000, 50_010, '')), 50_000);
  t.is(violations.length, 1);
  t.is(violations[0]!.check, 'lost');
  t.deepEqual(checkLost(history(grant('a', 0, 10, 0), owner('final', 50_000, 50_010, 'a')), 50_000), []);
  t.deepEqual(checkLost(history(grant('a', 0, 10, 0), release('a', 100), owner('final', 50_000, 50_010, '')), 50_000), []);
  t.deepEqual(checkLost(history(grant('a', 0, 10, 0), owner('c', 40_000, 40_010, '')), 50_000), [], 'reads before the final phase are not judged');
});

test('availability fails when a node answers nothing within the bound of a window; short windows are not judged', (t) => {
  const windows = [{ from: 1000, to: 12_000, nodes: ['n1', 'n2'], label: 'member paused' }];
  const h = history(
    { ...owner('p', 1500, 1600, ''), node: 'n2' },
    { ...owner('p', 4900, 5000, ''), node: 'n2' },
    { ...owner('p', 1500, 11_000, ''), node: 'n1' },
  );
  const violations = checkAvailability(h, windows, 8_000);
  t.is(violations.length, 1);
  t.regex(violations[0]!.message, /node n1 answered nothing sent in the 8000 ms after 1000/);
  t.deepEqual(checkAvailability(h, [{ ...windows[0]!, to: 5_000 }], 8_000), []);
});

test('availability fails when a node answered at the start of a window, then nothing for longer than the bound', (t) => {
  const windows = [{ from: 1000, to: 14_000, nodes: ['n1'], label: 'member paused' }];
  const answers = (...times: number[]): Op[] => history(...times.map((r) => ({ ...owner('p', r - 5, r, ''), node: 'n1' })));
  t.regex(checkAvailability(answers(1010, 1250, 10_500, 13_000), windows, 8_000)[0]!.message, /after 1250/);
  t.deepEqual(checkAvailability(answers(1010, 5_000, 9_000, 13_000), windows, 8_000), []);
});

test('checkHistory passes a clean handover and longestSilence measures the gaps', (t) => {
  const h = history(grant('a', 0, 10), release('a', 1000, 1020), grant('b', 20, 30, 3, 2), location('b', 1100, 1110, 1), release('b', 4000, 4010));
  t.deepEqual(checkHistory(h, Infinity), []);
  t.is(longestSilence(h, 'n1', 0, 5000), 4010 - 1110);
});
