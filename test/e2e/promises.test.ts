import test from 'ava';
import { Command } from '../../src/protocol/constants.js';
import { bounded } from '../helpers/bounded.js';
import { pollUntil } from '../helpers/poll.js';
import { DEFAULT_WAIT_MS, startServer, type LogEvent, type ServerProcess } from '../helpers/serverProcess.js';
import { frames, hex, pipeline, readReplyBytes, req } from '../helpers/wire.js';

// Tests that fail when a promise the README makes is broken.

/** README: refusal lines are capped at 10 a second per reason. */
const REFUSAL_LINES_PER_SECOND = 10;
/** Refused connections in the flood: several times the cap, so a missing cap shows. */
const FLOOD = 60;
/** Connections opened at once during the flood. */
const FLOOD_BATCH = 20;
/** ISO timestamps (wall clock) against the server's monotonic window: allow for rounding. */
const CLOCK_SLACK_MS = 20;
/** The throttle's window is a second; a line with suppressed=N follows well within this. */
const SUPPRESSED_LINE_WAIT_MS = 5_000;

async function refusedStranger(server: ServerProcess): Promise<void> {
  const stranger = await server.connect({ localAddress: '127.0.0.2' });
  const reply = hex(await stranger.readUntilClose());
  if (reply !== '00') throw new Error(`expected the refusal byte 00, got ${reply}`);
}

function suppressedOf(event: LogEvent): number {
  return event.fields.suppressed === undefined ? 0 : Number(event.fields.suppressed);
}

test('a flood of refused connections writes at most 10 refused lines a second, then one with suppressed=N', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n' });
  let refusals = 0;
  for (let sent = 0; sent < FLOOD; sent += FLOOD_BATCH) {
    await Promise.all(Array.from({ length: FLOOD_BATCH }, () => refusedStranger(server)));
    refusals += FLOOD_BATCH;
  }
  const flooded = server.eventsNamed('refused');
  const first = Date.parse(flooded[0]!.fields.ts!);
  const inFirstSecond = flooded.filter((e) => Date.parse(e.fields.ts!) < first + 1000 - CLOCK_SLACK_MS);
  t.true(inFirstSecond.length <= REFUSAL_LINES_PER_SECOND, `${inFirstSecond.length} refused lines within the first second of a flood of ${FLOOD}`);
  // A later refusal reports what the flood suppressed; keep refusing (one at a time) until it comes.
  const reporting = await pollUntil(
    'a refused line with suppressed=N',
    async () => {
      const found = server.eventsNamed('refused').find((e) => suppressedOf(e) > 0);
      if (found !== undefined) return found;
      await refusedStranger(server);
      refusals++;
      return undefined;
    },
    SUPPRESSED_LINE_WAIT_MS,
  );
  const lines = server.eventsNamed('refused');
  t.true(lines.every((e) => e.fields.reason === 'not-in-hosts-file' && e.fields.peer === '127.0.0.2'));
  t.true(lines.length < refusals, `${lines.length} lines for ${refusals} refusals`);
  t.true(suppressedOf(reporting) > 0);
  // Every refusal is either a line of its own or counted in a later line's suppressed=N.
  const accounted = lines.reduce((sum, e) => sum + 1 + suppressedOf(e), 0);
  t.true(accounted <= refusals, `${accounted} accounted for, ${refusals} refused`);
  t.true(accounted >= lines.length + suppressedOf(reporting));
});

/**
 * Fills one queue with `entries` entries (long owner names), then sends `lists` list requests of
 * it as one write, stops reading at the first reply byte (so replies are still waiting in the
 * server), sends SIGTERM, and reads on once the locks are saved: every reply must arrive whole,
 * followed by a clean end of the connection.
 */
const nobleDeathDelivers = test.macro(async (t, entries: number, lists: number, reader: 'waits-for-save' | 'slow') => {
  const server = await startServer(t);
  const filler = await server.accepted();
  const owner = (i: number): string => `${String(i).padStart(6, '0')}-${'o'.repeat(200)}`;
  await pipeline(filler, ...Array.from({ length: entries }, (_, i) => req.request('big', 'i', owner(i), { ttl: 0, ttw: 0 })));
  filler.send(frames(req.list('big')));
  const one = await readReplyBytes(filler, Command.List);
  t.log(`one list reply is ${one.length} bytes; ${lists} pipelined`);

  const client = await server.accepted();
  const socket = client.socket;
  const chunks: Buffer[] = [];
  let firstByte!: () => void;
  const gotFirstByte = new Promise<void>((resolve) => (firstByte = resolve));
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    firstByte();
  });
  const errors: Error[] = [];
  socket.on('error', (error) => errors.push(error));
  const ended = new Promise<void>((resolve) => socket.once('end', () => resolve()));
  const closed = new Promise<boolean>((resolve) => socket.once('close', (hadError) => resolve(hadError)));
  socket.write(frames(...Array.from({ length: lists }, () => req.list('big'))));
  // A reply byte proves the server has received the requests (they went out as one small write).
  await bounded(gotFirstByte, DEFAULT_WAIT_MS, 'the first reply byte');
  if (reader === 'waits-for-save') {
    // Stop reading, so replies are still waiting in the server when it saves and says goodbye.
    socket.pause();
    const saved = server.nextEvent('locks-saved');
    server.signal('SIGTERM');
    await saved;
    socket.resume();
  } else {
    // A slow reader: a pause after every chunk, from before the signal until the end.
    socket.on('data', () => {
      socket.pause();
      setTimeout(() => socket.resume(), 5);
    });
    server.signal('SIGTERM');
  }
  await bounded(ended, DEFAULT_WAIT_MS, 'the server to end the connection');
  t.false(await bounded(closed, DEFAULT_WAIT_MS, 'the socket to close'), 'closed without error');
  t.deepEqual(errors, [], 'no ECONNRESET or other socket error');
  const received = Buffer.concat(chunks);
  t.is(received.length, one.length * lists, 'every reply, whole');
  for (let i = 0; i < lists; i++) {
    if (!received.subarray(i * one.length, (i + 1) * one.length).equals(one)) {
      t.fail(`reply ${i + 1} differs from the list reply`);
      break;
    }
  }
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
});

test('noble death delivers a reply of megabytes still being written, then ends the connection cleanly', nobleDeathDelivers, 20_000, 1, 'waits-for-save');

// Requests received but queued behind write backpressure are still answered at noble death while
// the client keeps reading, however slowly (the wait is bounded: README, Signals).
test('noble death answers every request already received to a client that reads slowly', nobleDeathDelivers, 600, 40, 'slow');
