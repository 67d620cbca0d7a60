import type { ByteString } from '../../src/bytes.js';
import { BufferWriter } from '../../src/protocol/BufferWriter.js';
import { Command } from '../../src/protocol/constants.js';
import { decodeReply, replyFrameLength, type ReplyOf } from '../../src/protocol/decodeReply.js';
import { encodeRequest } from '../../src/protocol/encodeRequest.js';
import type { Request, StatsReply } from '../../src/protocol/messages.js';
import type { RawClient } from './rawClient.js';

/** Request builders, named after the protocol document's commands. */
export const req = {
  findOwner: (key: ByteString, index: ByteString): Request => ({ command: Command.FindOwner, key, index }),
  request: (
    key: ByteString,
    index: ByteString,
    owner: ByteString,
    { ttl = 0, ttw = 0, priority = 0 }: { ttl?: number; ttw?: number; priority?: number } = {},
  ): Request => ({ command: Command.Request, key, index, owner, ttl, ttw, priority }),
  location: (key: ByteString, index: ByteString, owner: ByteString): Request => ({
    command: Command.FindLocation,
    key,
    index,
    owner,
  }),
  renew: (key: ByteString, index: ByteString, owner: ByteString): Request => ({ command: Command.Renew, key, index, owner }),
  release: (key: ByteString, index: ByteString, owner: ByteString): Request => ({
    command: Command.Release,
    key,
    index,
    owner,
  }),
  releaseAll: (owner: ByteString): Request => ({ command: Command.ReleaseAll, owner }),
  list: (key: ByteString): Request => ({ command: Command.List, key }),
  stats: (): Request => ({ command: Command.Stats }),
};

/** The request frames, back to back, as one buffer (a pipelined batch). */
export function frames(...requests: Request[]): Buffer {
  const out = new BufferWriter();
  for (const request of requests) encodeRequest(out, request);
  return out.flush();
}

/** Reads the raw bytes of the reply to a request of `command` (replies carry no command byte). */
export function readReplyBytes(client: RawClient, command: Command): Promise<Buffer> {
  return client.readFrame((buffer) => replyFrameLength(command, buffer, 0, buffer.length));
}

export async function readReply<C extends Command>(client: RawClient, command: C): Promise<ReplyOf[C]> {
  return decodeReply(command, await readReplyBytes(client, command));
}

/** Sends every request in one write and reads their replies in order. */
export async function pipeline(client: RawClient, ...requests: Request[]): Promise<unknown[]> {
  client.send(frames(...requests));
  const replies: unknown[] = [];
  for (const request of requests) replies.push(await readReply(client, request.command));
  return replies;
}

/** One request, one decoded reply. */
export async function call<C extends Command>(client: RawClient, request: Request & { command: C }): Promise<ReplyOf[C]> {
  client.send(frames(request));
  return readReply(client, request.command);
}

export const ask = {
  findOwner: (c: RawClient, key: ByteString, index: ByteString) => call(c, req.findOwner(key, index)) as Promise<ByteString>,
  request: (c: RawClient, ...args: Parameters<typeof req.request>) => call(c, req.request(...args)) as Promise<number>,
  location: (c: RawClient, key: ByteString, index: ByteString, owner: ByteString) => call(c, req.location(key, index, owner)) as Promise<number>,
  renew: (c: RawClient, key: ByteString, index: ByteString, owner: ByteString) => call(c, req.renew(key, index, owner)) as Promise<boolean>,
  release: (c: RawClient, key: ByteString, index: ByteString, owner: ByteString) => call(c, req.release(key, index, owner)) as Promise<number>,
  releaseAll: (c: RawClient, owner: ByteString) => call(c, req.releaseAll(owner)) as Promise<number>,
  list: (c: RawClient, key: ByteString) => call(c, req.list(key)) as Promise<ReplyOf[typeof Command.List]>,
  stats: (c: RawClient) => call(c, req.stats()) as Promise<StatsReply>,
};

/** Hex of some bytes, for readable byte-exact assertions. */
export function hex(bytes: Buffer | readonly number[]): string {
  return Buffer.from(bytes as Buffer).toString('hex');
}

/** Builds bytes from numbers and ASCII strings: bytes(0x02, 4, 'user', …). */
export function bytes(...parts: Array<number | string>): Buffer {
  return Buffer.concat(parts.map((part) => (typeof part === 'number' ? Buffer.from([part]) : Buffer.from(part, 'latin1'))));
}

/** Requests (TTL, TTW and priority 0) for each [key, index, owner], pipelined; their positions. */
export async function enqueue(client: RawClient, ...entries: Array<[ByteString, ByteString, ByteString]>): Promise<number[]> {
  return (await pipeline(client, ...entries.map(([key, index, owner]) => req.request(key, index, owner)))) as number[];
}
