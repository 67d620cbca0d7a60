import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * How both ends of a link between nodes prove themselves (issue 36): by the cluster's peer secret,
 * random bytes kept in etcd at a key outside the cluster's prefix (EtcdLog), so that a role
 * allowed to read the cluster's keys (monitoring) cannot read it. Each end sends a fresh nonce;
 * each answers with an HMAC, under the secret, of both nonces and of who the link joins: the
 * forwarding node's name and fence key, and the name of the node whose sequencer it reaches.
 *
 * So the sequencer learns that the forwarder holds the secret and which node it is (the name a
 * batch must carry, the fence key a bundle may put), and the forwarder learns that the other end
 * holds the secret and is the node it takes to lead, not whoever took that node's address after
 * it died. A proof is bound to one link (both nonces) and one role (the context), so none can be
 * replayed or reflected. After the handshake frames carry no MAC of their own: the link is as
 * private as the network between the nodes.
 */

/** Bytes of a peer secret (EtcdLog creates it once per cluster). */
export const PEER_SECRET_BYTES = 32;
export const NONCE_BYTES = 16;
export const PROOF_BYTES = 32;

/** Who a link joins, as both ends must agree for either proof to hold. */
export interface LinkParties {
  /** The forwarding node's name: every batch it forwards must name it as proposer. */
  readonly forwarder: string;
  /** The forwarding node's fence key (EtcdLog): the only one a bundle may put for it. */
  readonly fenceKey: Uint8Array;
  /** The node whose sequencer the link reaches: the leader, as the forwarder sees it. */
  readonly sequencer: string;
}

/** What each proof binds itself to, so a proof made for one role is worthless in the other. */
const SEQUENCER_CONTEXT = Buffer.from('lockserver peer link v3: sequencer\0');
const FORWARDER_CONTEXT = Buffer.from('lockserver peer link v3: forwarder\0');

export function newNonce(): Buffer {
  return randomBytes(NONCE_BYTES);
}

/** The sequencer's proof, for the link `parties` opened with both nonces. */
export function sequencerProof(secret: Uint8Array, parties: LinkParties, forwarderNonce: Uint8Array, sequencerNonce: Uint8Array): Buffer {
  return proof(secret, SEQUENCER_CONTEXT, parties, forwarderNonce, sequencerNonce);
}

/** The forwarder's proof, for the link `parties` opened with both nonces. */
export function forwarderProof(secret: Uint8Array, parties: LinkParties, forwarderNonce: Uint8Array, sequencerNonce: Uint8Array): Buffer {
  return proof(secret, FORWARDER_CONTEXT, parties, forwarderNonce, sequencerNonce);
}

/** Whether `got` is `expected` (compared in constant time). */
export function proofHolds(expected: Buffer, got: Uint8Array): boolean {
  return got.length === expected.length && timingSafeEqual(expected, got);
}

function proof(secret: Uint8Array, context: Buffer, parties: LinkParties, forwarderNonce: Uint8Array, sequencerNonce: Uint8Array): Buffer {
  const hmac = createHmac('sha256', secret).update(context);
  for (const part of [Buffer.from(parties.forwarder, 'latin1'), parties.fenceKey, Buffer.from(parties.sequencer, 'latin1'), forwarderNonce, sequencerNonce]) {
    const length = Buffer.alloc(2);
    length.writeUInt16BE(part.length);
    hmac.update(length).update(part);
  }
  return hmac.digest();
}
