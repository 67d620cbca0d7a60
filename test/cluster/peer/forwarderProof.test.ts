import test from 'ava';
import { randomBytes } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { BatchEncoder, LogOp } from '../../../src/cluster/LogCodec.js';
import { NONCE_BYTES, PROOF_BYTES } from '../../../src/cluster/peer/PeerAuth.js';
import { ACCEPTED_FRAME, decodeHello, encodeChallenge, PEER_LINK_BYTE, PeerFrameCutter, PeerFrameType } from '../../../src/cluster/peer/PeerCodec.js';
import { SequencerLink } from '../../../src/cluster/peer/SequencerLink.js';
import { AppendRefusedError } from '../../../src/cluster/ReplicatedLog.js';
import { GREETING_ACCEPTED } from '../../../src/protocol/constants.js';
import { bounded } from '../../helpers/bounded.js';

// The forwarder checks the sequencer's proof itself. The other peer-link tests meet impostors that
// are real PeerListeners with another secret; this one is a raw socket that speaks the handshake
// well (greeting, a challenge naming the expected leader, "accepted") but proves nothing: its proof
// is random bytes. A forwarder that took "accepted" on trust would link and forward to it.

const SECRET = Buffer.alloc(32, 7);
const batch = new BatchEncoder().encode({ proposer: 'n2', incarnation: 1, seq: 1, commands: [{ op: LogOp.ReleaseAll, owner: 'o' }] });

test('a raw listener answering the hello with a well-formed challenge, a random proof and "accepted" gets no link and no forward frame', async (t) => {
  /** The frame types each connection sent after its link byte, in order. */
  const sent: number[][] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    const types: number[] = [];
    sent.push(types);
    const cutter = new PeerFrameCutter();
    let linkByte = false;
    socket.write(Buffer.of(GREETING_ACCEPTED));
    socket.on('data', (chunk: Buffer) => {
      if (!linkByte) {
        t.is(chunk[0], PEER_LINK_BYTE);
        linkByte = true;
        chunk = chunk.subarray(1);
      }
      cutter.feed(chunk, (frame) => {
        types.push(frame[0]!);
        if (frame[0] !== PeerFrameType.Hello) return;
        t.is(decodeHello(frame).forwarder, 'n2');
        const challenge = encodeChallenge({ sequencer: 'n1', nonce: randomBytes(NONCE_BYTES), proof: randomBytes(PROOF_BYTES) });
        socket.write(Buffer.concat([challenge, ACCEPTED_FRAME]));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const refusals: string[] = [];
  const link = new SequencerLink(
    'n1',
    { host: '127.0.0.1', port: address.port },
    { name: 'n2', fenceKey: Buffer.from('/c/fences/0123456789abcdef') },
    () => SECRET,
    (reason) => refusals.push(reason),
  );
  t.teardown(() => {
    link.close();
    for (const socket of sockets) socket.destroy();
    server.close();
  });

  await bounded(
    (async () => {
      while (refusals.length === 0 && !link.up) await new Promise((r) => setTimeout(r, 5));
    })(),
    5_000,
    'the forwarder to refuse the listener (or, wrongly, to link)',
  );
  t.false(link.up, 'no link');
  t.regex(refusals[0] ?? '', /does not prove it holds the peer secret/);
  const lease = { leaseId: '1', fenceKey: Buffer.alloc(0), endsAt: performance.now() + 2_000 };
  await t.throwsAsync(link.forward(batch, lease, 1_000), { instanceOf: AppendRefusedError, message: /no link/ });
  link.close();
  t.true(sent.length >= 1);
  for (const types of sent) t.deepEqual(types, [PeerFrameType.Hello], 'a hello only: neither a proof of its own nor a forward');
});
