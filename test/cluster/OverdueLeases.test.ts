import test from 'ava';
import { OVERDUE_MARGIN_MS, OverdueLeases } from '../../src/cluster/etcd/OverdueLeases.js';

test('a lease falls due its TTL plus the margin after it was first heard of, and is handed out once', (t) => {
  const leases = new OverdueLeases();
  leases.heard('7', 3_000, 1_000);
  leases.heard('7', 3_000, 2_500); // heard again (a repeated event): the first time counts
  t.deepEqual(leases.takeDue(1_000 + 3_000 + OVERDUE_MARGIN_MS - 1), []);
  t.deepEqual(leases.takeDue(1_000 + 3_000 + OVERDUE_MARGIN_MS), ['7']);
  t.deepEqual(leases.takeDue(10_000), [], 'one revoke in flight at a time');
  leases.revokeFailed('7', 10_200);
  t.deepEqual(leases.takeDue(10_100), [], 'not right after a failed revoke');
  t.deepEqual(leases.takeDue(10_200), ['7'], 'a failed revoke is tried again');
  leases.gone('7');
  t.deepEqual(leases.takeDue(20_000), []);
  t.is(leases.size, 0);
});

test('each lease keeps its own TTL', (t) => {
  const leases = new OverdueLeases();
  leases.heard('short', 2_000, 0);
  leases.heard('long', 6_000, 0);
  t.deepEqual(leases.takeDue(2_000 + OVERDUE_MARGIN_MS), ['short']);
  t.deepEqual(leases.takeDue(6_000 + OVERDUE_MARGIN_MS), ['long']);
});

test('a listing drops the leases missing from it, keeps when the others were first heard of, and takes the new ones as due at once', (t) => {
  const leases = new OverdueLeases();
  leases.heard('kept', 3_000, 0);
  leases.heard('dropped', 3_000, 0);
  leases.listed(
    [
      { id: 'kept', ttlMs: 3_000 },
      { id: 'new', ttlMs: 3_000 },
    ],
    2_000,
  );
  t.is(leases.size, 2);
  t.deepEqual(leases.takeDue(2_000), ['new'], 'announced up to a TTL before the listing, maybe overdue already: due at once');
  t.deepEqual(leases.takeDue(3_000 + OVERDUE_MARGIN_MS), ['kept']);
});

test('a lease gone while its revoke is in flight is forgotten, not handed out again', (t) => {
  const leases = new OverdueLeases();
  leases.heard('7', 1_000, 0);
  t.deepEqual(leases.takeDue(5_000), ['7']);
  leases.gone('7');
  leases.revokeFailed('7', 5_100); // the revoke's answer comes after etcd's delete event
  t.deepEqual(leases.takeDue(6_000), []);
});

test('a listing keeps a lease missing from it that it is told to keep (announced after the listing was read)', (t) => {
  const leases = new OverdueLeases();
  leases.heard('own', 3_000, 1_000);
  t.deepEqual(
    leases.listed([], 1_000, (id) => id === 'own'),
    [],
  );
  t.true(leases.has('own'));
  t.deepEqual(leases.listed([], 1_000), ['own']);
});
