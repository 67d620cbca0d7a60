import test from 'ava';
import { QueueDirectory } from '../../src/locks/QueueDirectory.js';

const indexesOf = (directory: QueueDirectory, key: string): string[] => [...directory.queuesOf(key)].map((q) => q.index);

test('a key grows from one queue to many and back, keeping index creation order', (t) => {
  const d = new QueueDirectory();
  const a = d.getOrCreate('k', 'a');
  t.is(d.getOrCreate('k', 'a'), a, 'the same queue comes back');
  t.is(d.get('k', 'b'), undefined, 'a lone queue answers only for its own index');
  const b = d.getOrCreate('k', 'b');
  const c = d.getOrCreate('k', 'c');
  t.deepEqual(indexesOf(d, 'k'), ['a', 'b', 'c']);
  d.delete(b);
  t.deepEqual(indexesOf(d, 'k'), ['a', 'c']);
  d.delete(a);
  t.deepEqual(indexesOf(d, 'k'), ['c']);
  t.is(d.get('k', 'c'), c, 'back to a lone queue, still found');
  t.is(d.get('k', 'a'), undefined);
  const a2 = d.getOrCreate('k', 'a');
  t.not(a2, a);
  t.deepEqual(indexesOf(d, 'k'), ['c', 'a']);
  d.delete(c);
  d.delete(a2);
  t.deepEqual(indexesOf(d, 'k'), []);
  t.deepEqual([...d.all()], []);
});

test('deleting a queue that is no longer filed changes nothing', (t) => {
  const d = new QueueDirectory();
  const old = d.getOrCreate('k', 'a');
  d.delete(old);
  const fresh = d.getOrCreate('k', 'a');
  d.delete(old);
  t.is(d.get('k', 'a'), fresh);
  d.getOrCreate('k', 'b');
  d.delete(old);
  t.deepEqual(indexesOf(d, 'k'), ['a', 'b']);
});

test('all() lists every queue of every key', (t) => {
  const d = new QueueDirectory();
  d.getOrCreate('x', '1');
  d.getOrCreate('y', '1');
  d.getOrCreate('y', '2');
  d.getOrCreate('z', '');
  t.deepEqual(
    [...d.all()].map((q) => `${q.key}/${q.index}`),
    ['x/1', 'y/1', 'y/2', 'z/'],
  );
});
