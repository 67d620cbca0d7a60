import test from 'ava';
import { Command } from '../../../src/protocol/constants.js';
import { RequestDecoder } from '../../../src/protocol/decodeRequest.js';
import { INCOMPLETE } from '../../../src/protocol/framing.js';
import { buildCycleRing, respCommand } from '../../../scripts/benchmark/load/cycles.js';
import { lockserverFraming, respFraming, respReplyLength, RespKind } from '../../../scripts/benchmark/load/framing.js';
import { splitConnections } from '../../../scripts/benchmark/load/runLoad.js';
import { parseRedisBenchmarkCsv } from '../../../scripts/benchmark/redisBenchmark.js';

test('RESP replies are measured whole, and only whole', (t) => {
  const replies = ['+OK\r\n', '$-1\r\n', ':1\r\n', '-ERR wrong\r\n', '$5\r\nhello\r\n', '*2\r\n$1\r\na\r\n:7\r\n', '*-1\r\n'];
  for (const text of replies) {
    const bytes = Buffer.from(text, 'latin1');
    t.is(respReplyLength(bytes, 0, bytes.length), bytes.length, JSON.stringify(text));
    for (let end = 0; end < bytes.length; end++) t.is(respReplyLength(bytes, 0, end), INCOMPLETE, `${JSON.stringify(text)} cut at ${end}`);
  }
  const two = Buffer.from('+OK\r\n:1\r\n', 'latin1');
  t.is(respReplyLength(two, 5, two.length), 4);
});

test('a lock cycle against Redis counts +OK and :1 as success, nil and :0 as not', (t) => {
  const ok = (kind: number, text: string): boolean => respFraming.ok(kind, Buffer.from(text, 'latin1'), 0);
  t.true(ok(RespKind.SetIfAbsent, '+OK\r\n'));
  t.false(ok(RespKind.SetIfAbsent, '$-1\r\n'));
  t.true(ok(RespKind.Delete, ':1\r\n'));
  t.false(ok(RespKind.Delete, ':0\r\n'));
  t.deepEqual(respCommand('DEL', 'k'), Buffer.from('*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n', 'latin1'));
});

test('a cycle ring alternates request and release on distinct keys, in whole batches', (t) => {
  for (const depth of [1, 2, 3, 16]) {
    const ring = buildCycleRing('lockserver', 'p', 'me', depth);
    t.true(
      ring.batches.every((_, i) => ring.kinds[i]!.length === depth),
      `depth ${depth}`,
    );
    const decoder = new RequestDecoder();
    decoder.push(Buffer.concat(ring.batches));
    const keys = new Set<string>();
    let n = 0;
    for (let r = decoder.next(); r !== undefined; r = decoder.next(), n++) {
      t.is(r.command, n % 2 === 0 ? Command.Request : Command.Release);
      if (r.command === Command.Request) {
        t.false(keys.has(r.key), `key ${r.key} requested twice in one ring`);
        keys.add(r.key);
        t.is(r.owner, 'me');
      }
    }
    t.is(
      n,
      ring.kinds.reduce((sum, k) => sum + k.length, 0),
    );
    t.is(n % 2, 0, 'the ring ends on a whole cycle');
  }
});

test('lockserver replies: position 1 and one removed are success', (t) => {
  t.true(lockserverFraming.ok(Command.Request, Buffer.from([0, 1]), 0));
  t.false(lockserverFraming.ok(Command.Request, Buffer.from([0, 2]), 0));
  t.false(lockserverFraming.ok(Command.Release, Buffer.from([0, 0]), 0));
  t.is(lockserverFraming.length(Command.Release, Buffer.from([0]), 0, 1), INCOMPLETE);
});

test('connections are split evenly over workers, and no worker gets none', (t) => {
  t.deepEqual(splitConnections(500, 2), [250, 250]);
  t.deepEqual(splitConnections(5, 2), [3, 2]);
  t.deepEqual(splitConnections(1, 4), [1]);
  t.deepEqual(splitConnections(3, 3), [1, 1, 1]);
});

test('redis-benchmark CSV: rate and latency columns by name', (t) => {
  const output = [
    'some warning line',
    '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"',
    '"SET lock:__rand_int__ owner NX PX 30000","68941.74","0.585","0.024","0.407","1.383","3.991","55.455"',
    '',
  ].join('\n');
  t.deepEqual(parseRedisBenchmarkCsv(output), [
    {
      test: 'SET lock:__rand_int__ owner NX PX 30000',
      rps: 68941.74,
      latencyMs: {
        avg_latency_ms: 0.585,
        min_latency_ms: 0.024,
        p50_latency_ms: 0.407,
        p95_latency_ms: 1.383,
        p99_latency_ms: 3.991,
        max_latency_ms: 55.455,
      },
    },
  ]);
  t.throws(() => parseRedisBenchmarkCsv('ERROR: connection refused'));
});
