import test from 'ava';
import { ShardedMap, shardOf } from '../../src/locks/ShardedMap.js';

test('a sharded map keeps every key, byte strings included, like one Map', (t) => {
  const map = new ShardedMap<number>();
  const keys = ['', 'a', '\x00', '\xff\xfe', 'held:1', 'held:2', 'x'.repeat(255)];
  keys.forEach((key, i) => map.set(key, i));
  t.is(map.size, keys.length);
  keys.forEach((key, i) => t.is(map.get(key), i, JSON.stringify(key)));
  map.set('held:1', 99);
  t.is(map.get('held:1'), 99);
  map.delete('held:2');
  t.is(map.get('held:2'), undefined);
  t.is(map.size, keys.length - 1);
  t.deepEqual([...map.values()].sort((a, b) => a - b), [0, 1, 2, 3, 6, 99]);
});

test('generated names spread over the shards', (t) => {
  const counts = new Array<number>(16).fill(0);
  for (let i = 0; i < 16_000; i++) counts[shardOf(`holder-${i}`)]!++;
  t.true(counts.every((c) => c > 0 && c < 16_000 / 4), counts.join(' '));
  for (const key of ['', 'a', 'ab', 'abc']) t.true(shardOf(key) >= 0 && shardOf(key) < 16);
});
