import test from 'ava';
import { CANNED_REPLIES, FrameCutter } from '../../../scripts/benchmark/targets/cannedReplies.js';
import { BufferWriter } from '../../../src/protocol/BufferWriter.js';
import { Command } from '../../../src/protocol/constants.js';
import { encodeRequest } from '../../../src/protocol/encodeRequest.js';

/** A request, a release with a non-ASCII owner, a stats and a find-owner: frames of four shapes. */
const STREAM: Buffer = (() => {
  const out = new BufferWriter();
  encodeRequest(out, { command: Command.Request, key: 'users', index: '42', owner: 'alice', ttl: 30, ttw: 0, priority: 1 });
  encodeRequest(out, { command: Command.Release, key: 'users', index: '42', owner: '\xff\x00b' });
  encodeRequest(out, { command: Command.Stats });
  encodeRequest(out, { command: Command.FindOwner, key: 'k', index: '' });
  return out.flush();
})();

/** Feeds `chunks` in order; returns each frame's bytes and what the last feed said. */
function cut(chunks: readonly Buffer[]): { frames: string[]; ok: boolean } {
  const cutter = new FrameCutter();
  const frames: string[] = [];
  let ok = true;
  for (const chunk of chunks) ok = cutter.feed(chunk, (input, offset, length) => frames.push(input.subarray(offset, offset + length).toString('hex')));
  return { frames, ok };
}

test('frames come out whole and in order however the stream is split', (t) => {
  const whole = cut([STREAM]);
  t.true(whole.ok);
  t.is(whole.frames.length, 4);
  t.is(whole.frames.join(''), STREAM.toString('hex'));
  t.deepEqual(cut([...STREAM].map((byte) => Buffer.from([byte]))).frames, whole.frames, 'byte by byte');
  for (let at = 0; at <= STREAM.length; at++) {
    t.deepEqual(cut([STREAM.subarray(0, at), STREAM.subarray(at)]).frames, whole.frames, `split at ${at}`);
  }
});

test('an unfinished frame waits for its bytes; an unknown command ends the connection', (t) => {
  const { frames, ok } = cut([STREAM.subarray(0, 3)]);
  t.true(ok);
  t.deepEqual(frames, []);
  t.false(cut([Buffer.from([0xee])]).ok);
  const afterGood = cut([Buffer.concat([STREAM, Buffer.from([0xee])])]);
  t.false(afterGood.ok);
  t.is(afterGood.frames.length, 4, 'the frames before it were still cut');
});

test('every command has a canned reply (a frame without one would crash the null servers)', (t) => {
  for (const [name, command] of Object.entries(Command)) t.true(CANNED_REPLIES[command] instanceof Buffer, name);
});
