import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { NONCE_BYTES } from './PeerCodec.js';

/**
 * The peer port's admission (issue 20): a node forwarding batches proves it knows the cluster's
 * peer secret, a random value kept in etcd under the cluster's prefix, by answering the
 * sequencer's fresh nonce with an HMAC of it. So forwarding is open exactly to those who could
 * write the cluster's keys in etcd themselves, and a lock client admitted by the hosts file
 * cannot put anything in the log through the peer port.
 */

/** Bytes of a peer secret (EtcdLog creates it once per cluster). */
export const PEER_SECRET_BYTES = 32;

/** What binds a proof to this use of the secret (not to be confused with any other HMAC of it). */
const PROOF_CONTEXT = Buffer.from('lockserver peer proof v1\0');

export function newNonce(): Buffer {
  return randomBytes(NONCE_BYTES);
}

export function peerProof(secret: Uint8Array, nonce: Uint8Array): Buffer {
  return createHmac('sha256', secret).update(PROOF_CONTEXT).update(nonce).digest();
}

/** Whether `proof` answers `nonce` under `secret` (compared in constant time). */
export function proofHolds(secret: Uint8Array, nonce: Uint8Array, proof: Uint8Array): boolean {
  const expected = peerProof(secret, nonce);
  return proof.length === expected.length && timingSafeEqual(expected, proof);
}
