import test from 'ava';
import {
  BatchEncoder,
  commandPosition,
  commandSize,
  decodeBatch,
  decodeValue,
  isRefused,
  encodeBundle,
  LogFormatError,
  LogOp,
  MAX_BATCH_COMMANDS,
  NO_REMAINING,
  OPS_FORMAT,
  INCARNATION_WAITS_FORMAT,
  REFERENCE_VALUE,
  type Batch,
  type ValuePart,
  type LogCommand,
} from '../../src/cluster/LogCodec.js';
import { Round } from '../../src/cluster/GroupCommit.js';
import { appendRequestBytes, MAX_APPEND_BYTES, STORE_MAX_REQUEST_BYTES } from '../../src/cluster/ReplicatedLog.js';
import { mulberry32, type Random } from '../../src/runtime/Random.js';

const int = (random: Random, below: number): number => Math.floor(random() * below);

/** Any byte string the wire can carry: every byte value, lengths 0–255 with both ends often. */
function byteString(random: Random): string {
  const pick = random();
  const length = pick < 0.15 ? 0 : pick < 0.3 ? 255 : int(random, 256);
  let s = '';
  for (let i = 0; i < length; i++) s += String.fromCharCode(int(random, 256));
  return s;
}

function command(random: Random): LogCommand {
  const key = byteString(random);
  const index = byteString(random);
  const owner = byteString(random);
  const op = 1 + int(random, 15);
  switch (op) {
    case LogOp.Request:
    case LogOp.AcquireWait:
      return {
        op,
        key,
        index,
        owner,
        ttl: int(random, 65_536),
        ttw: int(random, 65_536),
        priority: int(random, 256),
        allowCreate: random() < 0.5,
        maxEntries: int(random, 2 ** 32),
      };
    case LogOp.Renew:
      return { op: LogOp.Renew, key, index, owner };
    case LogOp.Release:
      return { op: LogOp.Release, key, index, owner };
    case LogOp.ReleaseKey:
      return { op: LogOp.ReleaseKey, key, owner };
    case LogOp.ReleaseAll:
      return { op: LogOp.ReleaseAll, owner };
    case LogOp.Import:
      return { op: LogOp.Import, ...savedFields(random, key, index, owner) };
    case LogOp.ImportStaged:
      // Written by versions before tokens: it carries none.
      return { op: LogOp.ImportStaged, importId: int(random, 2 ** 32), ...savedFields(random, key, index, owner), highestToken: 0 };
    case LogOp.ImportStagedFenced: {
      const highestToken = int(random, 2 ** 53);
      const token = random() < 0.3 ? 0 : int(random, highestToken + 1);
      return { op: LogOp.ImportStagedFenced, importId: int(random, 2 ** 32), ...savedFields(random, key, index, owner), token, highestToken };
    }
    case LogOp.ImportCommit:
      return { op: LogOp.ImportCommit, importId: int(random, 2 ** 32) };
    case LogOp.CancelWait:
      return { op: LogOp.CancelWait, key, index, owner };
    case LogOp.ExpireAndHold:
      return { op: LogOp.ExpireAndHold, key, index, owner, version: commandPosition(int(random, 2 ** 37), int(random, 65_536)), holdMs: int(random, 2 ** 32) };
    case LogOp.LiftHold:
      return { op: LogOp.LiftHold, key, index, version: commandPosition(int(random, 2 ** 37), int(random, 65_536)) };
    case LogOp.CancelWaitsOf:
      return { op: LogOp.CancelWaitsOf, node: owner, incarnation: int(random, 2 ** 32) };
    default:
      return { op: LogOp.Expire, key, index, owner, version: commandPosition(int(random, 2 ** 37), int(random, 65_536)) };
  }
}

/** What an import command carries of a saved entry, drawn at random. */
function savedFields(random: Random, key: string, index: string, owner: string) {
  return {
    key,
    index,
    owner,
    ttl: int(random, 65_536),
    ttw: int(random, 65_536),
    priority: int(random, 256),
    isOwner: random() < 0.5,
    token: 0,
    remainingMs: random() < 0.1 ? NO_REMAINING : int(random, 2 ** 32 - 1),
    first: random() < 0.5,
  };
}

function batch(random: Random, commands: number): Batch {
  return {
    proposer: byteString(random),
    incarnation: int(random, 2 ** 32),
    seq: int(random, 2 ** 32),
    commands: Array.from({ length: commands }, () => command(random)),
  };
}

/**
 * Decoding a log value is total: nothing comes out of it but its parts, whatever the bytes. Its
 * batches when every part decodes, else the first refusal (as a LogFormatError, to compare).
 */
function decodeOrFormatError(bytes: Uint8Array): Batch[] | LogFormatError {
  let parts: ValuePart[];
  try {
    parts = decodeValue(bytes);
  } catch (error) {
    throw new Error(`decodeValue threw ${String(error)} for ${Buffer.from(bytes).toString('hex')}`);
  }
  const refused = parts.find(isRefused);
  return refused === undefined ? (parts as Batch[]) : new LogFormatError(refused.refused);
}

/** Why each part of the value is refused (undefined for a part that decodes). */
function refusals(bytes: Uint8Array): Array<string | undefined> {
  return decodeValue(bytes).map((part) => (isRefused(part) ? part.refused : undefined));
}

test('every command round-trips, with any bytes in its strings (empty and 255 long included)', (t) => {
  const random = mulberry32(1);
  const encoder = new BatchEncoder();
  const ops = new Set<number>();
  let longest = 0;
  let empties = 0;
  for (let i = 0; i < 300; i++) {
    const b = batch(random, int(random, 12));
    for (const c of b.commands) {
      ops.add(c.op);
      if (!('owner' in c)) continue;
      longest = Math.max(longest, c.owner.length);
      if (c.owner.length === 0) empties++;
    }
    t.deepEqual(decodeBatch(encoder.encode(b)), b);
  }
  t.is(ops.size, Object.keys(LogOp).length, 'every op was tried');
  t.is(longest, 255);
  t.true(empties > 0);
});

test('a batch is written in format 1 unless it holds a command of format 4 (waiting, lock-delays); format 1 refuses those ops', (t) => {
  const encoder = new BatchEncoder();
  const header = { proposer: 'n1', incarnation: 1, seq: 1 };
  const plain = encoder.encode({ ...header, commands: [{ op: LogOp.Renew, key: 'k', index: 'i', owner: 'o' }] });
  t.is(plain[1], 1);
  const cancel = { op: LogOp.CancelWait, key: 'k', index: 'i', owner: 'o' } as const;
  const withCancel = encoder.encode({ ...header, commands: [{ op: LogOp.Renew, key: 'k', index: 'i', owner: 'o' }, cancel] });
  t.is(withCancel[1], OPS_FORMAT);
  t.deepEqual(decodeBatch(withCancel).commands[1], cancel);
  // The same bytes labelled format 1, as a node of the version before would read them: refused, not misread.
  const relabelled = Uint8Array.from(withCancel);
  relabelled[1] = 1;
  t.throws(() => decodeBatch(relabelled), { instanceOf: LogFormatError });
});

test('a batch holding a wait tied to its incarnation (AcquireWait, CancelWaitsOf) is written in format 5; formats 1 and 4 refuse those ops', (t) => {
  const encoder = new BatchEncoder();
  const header = { proposer: 'n1', incarnation: 7, seq: 1 };
  const acquire = { op: LogOp.AcquireWait, key: 'k', index: 'i', owner: 'o', ttl: 30, ttw: 0, priority: 0, allowCreate: true, maxEntries: 10 } as const;
  const end = { op: LogOp.CancelWaitsOf, node: 'n3', incarnation: 0xfffffffe } as const;
  const cancel = { op: LogOp.CancelWait, key: 'k', index: 'i', owner: 'o' } as const;
  for (const commands of [[acquire], [cancel, end], [end, cancel]]) {
    const bytes = encoder.encode({ ...header, commands });
    t.is(bytes[1], INCARNATION_WAITS_FORMAT);
    t.deepEqual(decodeBatch(bytes).commands, commands);
    // The same bytes labelled format 4 or 1, as a node of an earlier version would read them: refused, not misread.
    for (const older of [OPS_FORMAT, 1]) {
      const relabelled = Uint8Array.from(bytes);
      relabelled[1] = older;
      t.throws(() => decodeBatch(relabelled), { instanceOf: LogFormatError });
    }
  }
  t.is(encoder.encode({ ...header, commands: [cancel] })[1], OPS_FORMAT, 'a cancel of one wait stays format 4');
});

test('the encoder hands out independent buffers: a later batch does not overwrite an earlier one', (t) => {
  const random = mulberry32(2);
  const encoder = new BatchEncoder();
  const first = batch(random, 5);
  const firstBytes = encoder.encode(first);
  const copy = Buffer.from(firstBytes);
  encoder.encode(batch(random, 50));
  t.deepEqual(firstBytes, copy);
  t.deepEqual(decodeBatch(firstBytes), first);
});

test('commandSize is the encoded size of each command', (t) => {
  const random = mulberry32(3);
  const encoder = new BatchEncoder();
  for (let i = 0; i < 500; i++) {
    const c = command(random);
    const header = { proposer: 'node', incarnation: 7, seq: i };
    const withIt = encoder.encode({ ...header, commands: [c] }).length;
    const without = encoder.encode({ ...header, commands: [] }).length;
    t.is(withIt - without, commandSize(c), `op ${c.op}`);
  }
});

test('a batch cut at any byte, or with a byte more, is a LogFormatError', (t) => {
  const random = mulberry32(4);
  const encoder = new BatchEncoder();
  for (let round = 0; round < 6; round++) {
    const bytes = encoder.encode(batch(random, 8));
    for (let cut = 0; cut < bytes.length; cut++) {
      const result = decodeOrFormatError(bytes.subarray(0, cut));
      if (!(result instanceof LogFormatError)) return t.fail(`a batch cut at ${cut} of ${bytes.length} bytes decoded`);
    }
    t.true(decodeOrFormatError(Buffer.concat([bytes, Buffer.from([0])])) instanceof LogFormatError);
  }
  t.pass();
});

test('an unknown magic, format or op is refused', (t) => {
  const encoder = new BatchEncoder();
  const bytes = encoder.encode({ proposer: 'n', incarnation: 1, seq: 1, commands: [{ op: LogOp.ReleaseAll, owner: 'o' }] });
  const opAt = 2 + 2 + 12 + 2; // magic, format, name "n", incarnation, reserved, seq, count
  t.is(bytes[opAt], LogOp.ReleaseAll);
  const altered = (at: number, value: number): Buffer => {
    const copy = Buffer.from(bytes);
    copy[at] = value;
    return copy;
  };
  t.throws(() => decodeBatch(altered(0, 0x53)), { instanceOf: LogFormatError, message: /not a batch/ });
  t.throws(() => decodeBatch(altered(1, 2)), { instanceOf: LogFormatError, message: /format 2/ });
  for (const op of [0, 11, 0xff]) t.throws(() => decodeBatch(altered(opAt, op)), { instanceOf: LogFormatError, message: /unknown command/ });
});

test('garbage and damaged batches never throw anything but LogFormatError', (t) => {
  const random = mulberry32(5);
  const encoder = new BatchEncoder();
  let refused = 0;
  for (let i = 0; i < 3_000; i++) {
    let bytes: Buffer;
    if (i % 2 === 0) {
      bytes = Buffer.from(Array.from({ length: int(random, 64) }, () => int(random, 256)));
      if (bytes.length > 1 && random() < 0.5) [bytes[0], bytes[1]] = [0x42, 1 + int(random, 2)]; // get past the magic sometimes
    } else if (i % 4 === 1) {
      bytes = Buffer.from(encoder.encode(batch(random, 3)));
      for (let flips = 1 + int(random, 3); flips > 0; flips--) bytes[int(random, bytes.length)] = int(random, 256);
    } else {
      bytes = encodeBundle([encoder.encode(batch(random, 2)), encoder.encode(batch(random, 1))]);
      for (let flips = 1 + int(random, 3); flips > 0; flips--) bytes[int(random, bytes.length)] = int(random, 256);
    }
    if (decodeOrFormatError(bytes) instanceof LogFormatError) refused++;
  }
  t.true(refused > 1_500);
});

test('a command position leaves room for every command of a batch', (t) => {
  t.is(commandPosition(1, 0), 65_536);
  t.true(commandPosition(1, 65_535) < commandPosition(2, 0));
  t.true(Number.isSafeInteger(commandPosition(2 ** 36, 65_535)));
});

// Known bug, reported rather than fixed (LogCodec is not this branch's file): when encode() throws
// half-way (a string above 255 bytes), the reused writer keeps the bytes already written, and the
// next batch comes out with them in front: a corrupt value that every replica would refuse.
test('an encode that threw leaves nothing behind for the next batch', (t) => {
  const encoder = new BatchEncoder();
  t.throws(() => encoder.encode({ proposer: 'n', incarnation: 1, seq: 1, commands: [{ op: LogOp.ReleaseAll, owner: 'x'.repeat(256) }] }), {
    instanceOf: RangeError,
  });
  const next: Batch = { proposer: 'n', incarnation: 1, seq: 2, commands: [] };
  t.deepEqual(decodeOrFormatError(encoder.encode(next)), [next]);
});

test('names that share their length, or differ in one byte only, decode as themselves (a repeated name is reused, never a near one)', (t) => {
  const encoder = new BatchEncoder();
  const names = ['k:1', 'k:2', 'k:2', 'x:2', 'k:2', '', '', 'k:22', 'k:2', '\xff\x00\x80', '\xff\x00\x81', '\xfe\x00\x81'];
  const commands: LogCommand[] = [];
  for (const [i, name] of names.entries()) {
    const other = names[names.length - 1 - i]!;
    commands.push({ op: LogOp.Release, key: name, index: other, owner: name });
    commands.push({ op: LogOp.ReleaseKey, key: other, owner: name });
    commands.push({ op: LogOp.Expire, key: name, index: name, owner: other, version: i });
  }
  const b: Batch = { proposer: 'n1', incarnation: 7, seq: 9, commands };
  t.deepEqual(decodeBatch(encoder.encode(b)), b);
});

test("a node's own batch takes its commands from the node, not from decoding; any other batch is decoded", (t) => {
  const random = mulberry32(3);
  const encoder = new BatchEncoder();
  const mine = batch(random, 6);
  const bytes = encoder.encode(mine);
  const held = mine.commands.map((c) => ({ ...c }));
  const asked: unknown[] = [];
  const own = (header: { proposer: string; incarnation: number; seq: number }) => {
    asked.push(header);
    return header.seq === mine.seq ? { bytes, commands: held } : undefined;
  };
  const decoded = decodeBatch(bytes, own);
  t.is(decoded.commands, held, 'the commands the node holds, as they are');
  t.deepEqual(asked, [{ proposer: mine.proposer, incarnation: mine.incarnation, seq: mine.seq }]);
  const other = decodeBatch(encoder.encode({ ...mine, seq: mine.seq + 1 }), own);
  t.not(other.commands, held);
  t.deepEqual(other.commands, mine.commands);
});

test("a batch that copies a node's header (proposer, incarnation, seq: all readable in etcd) with other commands is decoded, not taken for the node's own", (t) => {
  const encoder = new BatchEncoder();
  const mine: Batch = { proposer: 'n1', incarnation: 7, seq: 3, commands: [{ op: LogOp.Release, key: 'k', index: 'i', owner: 'alice' }] };
  const bytes = encoder.encode(mine);
  const own = () => ({ bytes, commands: mine.commands });
  const forged: Batch = { ...mine, commands: [{ op: LogOp.ReleaseAll, owner: 'bob' }] };
  const decoded = decodeBatch(encoder.encode(forged), own);
  t.deepEqual(decoded, forged, 'every node applies the forged bytes alike, this one too');
  t.not(decoded.commands, mine.commands);
});

test("a batch filled to its byte limit with the longest names fits one append within etcd's request limit", (t) => {
  const longest = '\xff'.repeat(255);
  const request: LogCommand = {
    op: LogOp.Request,
    key: longest,
    index: longest,
    owner: longest,
    ttl: 65_535,
    ttw: 65_535,
    priority: 255,
    allowCreate: true,
    maxEntries: 2 ** 32 - 1,
  };
  const round = new Round(0);
  const ignored = { resolve: () => {}, reject: () => {} };
  while (round.addWrite(request, ignored)); // ends at the byte limit, or at MAX_BATCH_COMMANDS
  t.true(round.writes < MAX_BATCH_COMMANDS, 'the byte limit closed the batch');
  const bytes = new BatchEncoder().encode({ proposer: longest, incarnation: 2 ** 32 - 1, seq: 2 ** 32 - 1, commands: round.commands });
  t.true(bytes.length <= MAX_APPEND_BYTES, `${bytes.length} bytes`);
  t.true(bytes.length > MAX_APPEND_BYTES - commandSize(request), 'and it is as full as one more command allows');
  t.true(appendRequestBytes(bytes.length) <= STORE_MAX_REQUEST_BYTES);
});

test('a bundle decodes to its batches in order, each as its node encoded it; a single batch decodes as a value of one', (t) => {
  const random = mulberry32(11);
  const encoder = new BatchEncoder();
  for (let round = 0; round < 100; round++) {
    const batches = Array.from({ length: 1 + int(random, 5) }, () => batch(random, int(random, 8)));
    const bytes = encodeBundle(batches.map((b) => encoder.encode(b)));
    t.deepEqual(decodeValue(bytes), batches);
  }
  const one = batch(random, 3);
  t.deepEqual(decodeValue(encoder.encode(one)), [one]);
});

test('a bundle cut at any byte, or with a byte more, is a LogFormatError', (t) => {
  const random = mulberry32(12);
  const encoder = new BatchEncoder();
  const bytes = encodeBundle([encoder.encode(batch(random, 3)), encoder.encode(batch(random, 0)), encoder.encode(batch(random, 2))]);
  for (let cut = 0; cut < bytes.length; cut++) {
    if (!(decodeOrFormatError(bytes.subarray(0, cut)) instanceof LogFormatError)) return t.fail(`a bundle cut at ${cut} of ${bytes.length} bytes decoded`);
  }
  t.true(decodeOrFormatError(Buffer.concat([bytes, Buffer.from([0])])) instanceof LogFormatError);
});

test('a bundle of no batch, a bundle inside a bundle, and one with more commands than a version numbers are refused whole', (t) => {
  const encoder = new BatchEncoder();
  t.deepEqual(refusals(encodeBundle([])), ['a bundle of no batch']);
  const inner = encodeBundle([encoder.encode({ proposer: 'n', incarnation: 1, seq: 1, commands: [] })]);
  t.deepEqual(refusals(encodeBundle([inner])), ['batch 1 of a bundle is a bundle']);
  const release: LogCommand = { op: LogOp.ReleaseAll, owner: 'o' };
  const full = (seq: number, count: number) => encoder.encode({ proposer: 'n', incarnation: 1, seq, commands: Array.from({ length: count }, () => release) });
  // 65,536 commands is every place a version has; one more has none.
  const fits = Array.from({ length: 16 }, (_, i) => full(i + 1, 4_096));
  t.is(decodeValue(encodeBundle(fits)).length, 16);
  t.deepEqual(refusals(encodeBundle([...fits, full(17, 1)])), ['a bundle of 65537 commands (65536 at most)']);
});

test('in a bundle, a batch that cannot be read is refused alone: the batches around it decode', (t) => {
  const encoder = new BatchEncoder();
  const ok = (seq: number): Batch => ({ proposer: 'n', incarnation: 1, seq, commands: [{ op: LogOp.ReleaseAll, owner: 'o' }] });
  const bad = Buffer.from(encoder.encode(ok(2)));
  bad[bad.length - 1 - 1 - 1] = 0xee; // the command's op byte (then a one-byte owner): an unknown command
  const cut = encoder.encode(ok(3)).subarray(0, 6);
  t.deepEqual(refusals(encodeBundle([encoder.encode(ok(1)), bad, encoder.encode(ok(4)), cut])), [
    undefined,
    'unknown command 238',
    undefined,
    'value cut short at byte 4',
  ]);
});

test('a reference to a retained batch is never decoded as a value: the store must hand over the batch itself', (t) => {
  t.deepEqual(refusals(REFERENCE_VALUE), ['a reference to a retained batch that did not come with it']);
  // Two bytes that are not a reference stay what they were (a batch cut short).
  t.regex(refusals(Uint8Array.of(0x42, 1))[0] ?? '', /cut short/);
});

test("in a bundle, a node's own batch takes its commands from the node and the others are decoded", (t) => {
  const random = mulberry32(13);
  const encoder = new BatchEncoder();
  const [before, mine, after] = [batch(random, 2), batch(random, 4), batch(random, 3)];
  const held = mine.commands.map((c) => ({ ...c }));
  const mineBytes = encoder.encode(mine);
  const own = (header: { seq: number; proposer: string }) =>
    header.seq === mine.seq && header.proposer === mine.proposer ? { bytes: mineBytes, commands: held } : undefined;
  const decoded = decodeValue(encodeBundle([encoder.encode(before), mineBytes, encoder.encode(after)]), own);
  t.is((decoded[1] as Batch).commands, held);
  t.deepEqual(decoded, [before, mine, after]);
});
