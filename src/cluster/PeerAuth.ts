import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { NONCE_BYTES } from './PeerCodec.js';

/**
 * The peer port's admission (issue 20): a node forwarding batches proves it knows the cluster's
 * peer secret, a random value kept in etcd under the cluster's prefix, by answering the
 * sequencer's fresh nonce with an HMAC of it and of the address it dialled (the sequencer's
 * declared one). So forwarding is open only to those who could read the cluster's keys in etcd,
 * a lock client admitted by the hosts file cannot put anything in the log through the peer port,
 * and a proof obtained by posing as one sequencer (say, on a dead leader's old address) is
 * worthless at any other. After the handshake frames carry no MAC of their own: the link is as
 * private as the network between the nodes (as etcd's peer traffic without TLS is).
 */

/** Bytes of a peer secret (EtcdLog creates it once per cluster). */
export const PEER_SECRET_BYTES = 32;

/** What binds a proof to this use of the secret (not to be confused with any other HMAC of it). */
const PROOF_CONTEXT = Buffer.from('lockserver peer proof v2\0');

export function newNonce(): Buffer {
  return randomBytes(NONCE_BYTES);
}

/** The proof for the sequencer at `address` (as declared, host:port) that sent `nonce`. */
export function peerProof(secret: Uint8Array, address: string, nonce: Uint8Array): Buffer {
  const where = Buffer.from(address);
  const length = Buffer.alloc(2);
  length.writeUInt16BE(where.length);
  return createHmac('sha256', secret).update(PROOF_CONTEXT).update(length).update(where).update(nonce).digest();
}

/** Whether `proof` answers `nonce` for the sequencer at `address` under `secret` (compared in constant time). */
export function proofHolds(secret: Uint8Array, address: string, nonce: Uint8Array, proof: Uint8Array): boolean {
  const expected = peerProof(secret, address, nonce);
  return proof.length === expected.length && timingSafeEqual(expected, proof);
}
