import test from 'ava';
import { hasPrefix, prefixEnd } from '../../src/cluster/etcd/calls.js';

// The key-range helpers EtcdLog builds its watches, listings and checks from: keys are bytes.

test('hasPrefix compares bytes: the prefix itself and longer keys match; shorter keys and a difference in any byte do not', (t) => {
  const prefix = Buffer.from('/c/batches/');
  t.true(hasPrefix(Buffer.from('/c/batches/0123/a'), prefix));
  t.true(hasPrefix(prefix, prefix));
  t.false(hasPrefix(Buffer.from('/c/batches'), prefix), 'shorter than the prefix');
  t.false(hasPrefix(Buffer.from('/c/batcheS/0123'), prefix), 'one byte differs');
  t.false(hasPrefix(Buffer.from('/c/log'), prefix));
  t.true(hasPrefix(Buffer.from([0xff, 0x80, 0x00, 0x01]), Buffer.from([0xff, 0x80, 0x00])), 'bytes above 0x7f and zero bytes');
  t.false(hasPrefix(Buffer.from([0xff, 0x81, 0x00]), Buffer.from([0xff, 0x80])));
});

test('prefixEnd is the first key after every key with the prefix', (t) => {
  t.deepEqual(prefixEnd(Buffer.from('/c/')), Buffer.from('/c0'));
  t.deepEqual(prefixEnd(Buffer.from([0x61, 0xff, 0xff])), Buffer.from([0x62]));
  t.deepEqual(prefixEnd(Buffer.from([0xff])), Buffer.from([0]), 'no key after: the whole keyspace from the prefix');
});
