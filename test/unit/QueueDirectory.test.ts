import test from 'ava';
import { LockEntry } from '../../src/locks/LockEntry.js';
import type { LockQueue } from '../../src/locks/LockQueue.js';
import { QueueDirectory } from '../../src/locks/QueueDirectory.js';

const indexesOf = (directory: QueueDirectory, key: string): string[] => [...directory.queuesOf(key)].map((q) => q.index);

/** Files a queue for (key, index) that holds an owner, as the table would. */
function held(directory: QueueDirectory, key: string, index: string): LockQueue {
  const queue = directory.getOrCreate(key, index);
  queue.owner = new LockEntry(queue, 'someone', 0, 0, 0, 0);
  return queue;
}

function empty(directory: QueueDirectory, queue: LockQueue, now: number): void {
  queue.owner = undefined;
  directory.vacate(queue, now);
}

test('a key grows from one queue to many and back, keeping index creation order', (t) => {
  const d = new QueueDirectory();
  const a = held(d, 'k', 'a');
  t.is(d.getOrCreate('k', 'a'), a, 'the same queue comes back');
  t.is(d.get('k', 'b'), undefined, 'a lone queue answers only for its own index');
  const b = held(d, 'k', 'b');
  const c = held(d, 'k', 'c');
  t.deepEqual(indexesOf(d, 'k'), ['a', 'b', 'c']);
  d.delete(b);
  t.deepEqual(indexesOf(d, 'k'), ['a', 'c']);
  d.delete(a);
  t.deepEqual(indexesOf(d, 'k'), ['c']);
  t.is(d.get('k', 'c'), c, 'back to a lone queue, still found');
  t.is(d.get('k', 'a'), undefined);
  const a2 = held(d, 'k', 'a');
  t.not(a2, a);
  t.deepEqual(indexesOf(d, 'k'), ['c', 'a']);
  d.delete(c);
  d.delete(a2);
  t.deepEqual(indexesOf(d, 'k'), []);
  t.deepEqual([...d.all()], []);
});

test('deleting a queue that is no longer filed changes nothing', (t) => {
  const d = new QueueDirectory();
  const old = held(d, 'k', 'a');
  d.delete(old);
  const fresh = held(d, 'k', 'a');
  d.delete(old);
  t.is(d.get('k', 'a'), fresh);
  held(d, 'k', 'b');
  d.delete(old);
  t.deepEqual(indexesOf(d, 'k'), ['a', 'b']);
});

test('all() lists every queue of every key', (t) => {
  const d = new QueueDirectory();
  held(d, 'x', '1');
  held(d, 'y', '1');
  held(d, 'y', '2');
  held(d, 'z', '');
  t.deepEqual(
    [...d.all()].map((q) => `${q.key}/${q.index}`),
    ['x/1', 'y/1', 'y/2', 'z/'],
  );
});

test('an emptied queue stays filed, and is reused, until it has been empty past the cutoff', (t) => {
  const d = new QueueDirectory();
  const q = held(d, 'k', 'i');
  empty(d, q, 100);
  t.is(d.get('k', 'i'), q, 'still filed while its vacancy is young');
  t.is(d.forgetVacant(99, 10), 0, 'nothing is due before its time');
  t.is(d.getOrCreate('k', 'i'), q, 'taken again: the same queue, no new slot');
  q.owner = new LockEntry(q, 'again', 0, 0, 0, 0);
  t.is(d.forgetVacant(1_000, 10), 1, 'its vacancy comes due…');
  t.is(d.get('k', 'i'), q, '…but it is in use again, so it stays');
  empty(d, q, 200);
  empty(d, q, 300);
  t.is(d.pendingVacancies, 1, 'queued once however often it empties');
  t.is(d.forgetVacant(250, 10), 1);
  t.is(d.get('k', 'i'), q, 'emptied again at 300: not yet');
  t.is(d.forgetVacant(300, 10), 1);
  t.is(d.get('k', 'i'), undefined, 'empty since 300: forgotten');
  t.is(d.pendingVacancies, 0);
});

test('forgetting is budgeted and a lone empty queue gives way to another index', (t) => {
  const d = new QueueDirectory();
  const queues = ['a', 'b', 'c'].map((key) => held(d, key, '0'));
  for (const q of queues) empty(d, q, 0);
  t.is(d.forgetVacant(0, 2), 2);
  t.is(d.forgetVacant(0, 2), 1);
  t.deepEqual([...d.all()], []);

  const lone = held(d, 'k', 'old');
  empty(d, lone, 5);
  const other = held(d, 'k', 'new');
  t.deepEqual(indexesOf(d, 'k'), ['new'], 'the empty lone queue was replaced, not kept beside');
  d.forgetVacant(5, 10);
  t.is(d.get('k', 'new'), other);
});
