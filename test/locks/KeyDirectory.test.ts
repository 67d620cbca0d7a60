import test from 'ava';
import { NO_ID } from '../../src/locks/HashIndex.js';
import { KeyDirectory } from '../../src/locks/KeyDirectory.js';
import { NameStore } from '../../src/locks/NameStore.js';

const SEED = 1;
const indexesOf = (d: KeyDirectory, key: string): string[] => [...d.queuesOf(key)].map((q) => d.indexOf(q));
const everything = (d: KeyDirectory): string[] => [...d.all()].map((q) => `${d.keyOf(q)}/${d.indexOf(q)}`);

test('a key grows from one queue to many and back, keeping index creation order', (t) => {
  const d = new KeyDirectory(new NameStore(), SEED);
  const a = d.getOrCreate('k', 'a');
  t.is(d.getOrCreate('k', 'a'), a, 'the same queue comes back');
  t.is(d.find('k', 'b'), NO_ID, 'a lone queue answers only for its own index');
  const b = d.getOrCreate('k', 'b');
  const c = d.getOrCreate('k', 'c');
  t.deepEqual(indexesOf(d, 'k'), ['a', 'b', 'c']);
  t.deepEqual([d.find('k', 'a'), d.find('k', 'b'), d.find('k', 'c')], [a, b, c]);
  d.delete(b);
  t.deepEqual(indexesOf(d, 'k'), ['a', 'c']);
  t.is(d.find('k', 'b'), NO_ID);
  d.delete(a);
  t.deepEqual(indexesOf(d, 'k'), ['c']);
  t.is(d.find('k', 'c'), c, 'back to a lone queue, still found');
  t.is(d.find('k', 'a'), NO_ID);
  d.getOrCreate('k', 'a');
  t.deepEqual(indexesOf(d, 'k'), ['c', 'a'], 'taken again: listed as newly created');
  d.delete(d.find('k', 'c'));
  d.delete(d.find('k', 'a'));
  t.deepEqual(indexesOf(d, 'k'), []);
  t.deepEqual(everything(d), []);
  t.deepEqual([d.keyCount, d.queueCount], [0, 0]);
});

test('keys list in creation order; a key deleted and made again goes last', (t) => {
  const d = new KeyDirectory(new NameStore(), SEED);
  d.getOrCreate('x', '1');
  d.getOrCreate('y', '1');
  d.getOrCreate('y', '2');
  d.getOrCreate('z', '');
  t.deepEqual(everything(d), ['x/1', 'y/1', 'y/2', 'z/']);
  d.delete(d.find('x', '1'));
  d.getOrCreate('x', '1');
  t.deepEqual(everything(d), ['y/1', 'y/2', 'z/', 'x/1']);
});

test('names are bytes: keys and indexes differing in any byte, or only in length, are distinct', (t) => {
  const d = new KeyDirectory(new NameStore(), SEED);
  const names = ['', '\x00', '\x00\x00', '\xff', 'a', 'A', 'é', '\xc3\xa9', 'a'.repeat(255)];
  for (const key of names) for (const index of names) d.getOrCreate(key, index);
  t.is(d.queueCount, names.length ** 2);
  t.is(d.keyCount, names.length);
  for (const key of names) t.deepEqual(indexesOf(d, key), names);
});

test('a key with a hundred thousand indexes finds each, and forgets them all', (t) => {
  const d = new KeyDirectory(new NameStore(), SEED);
  const queues: number[] = [];
  for (let i = 0; i < 100_000; i++) queues.push(d.getOrCreate('table', `row${i}`));
  for (let i = 0; i < 100_000; i += 997) t.is(d.find('table', `row${i}`), queues[i]!);
  t.is(d.find('table', 'row100000'), NO_ID);
  for (let i = 0; i < 100_000; i++) d.delete(queues[i]!);
  t.deepEqual([d.keyCount, d.queueCount], [0, 0]);
  t.is(d.find('table', 'row5'), NO_ID);
});
