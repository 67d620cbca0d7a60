import type { BufferWriter } from './BufferWriter.js';
import { Command, MAX_U16, MAX_U32 } from './constants.js';
import type { Request } from './messages.js';

function checkU16(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 0 || value > MAX_U16) {
    throw new RangeError(`${name} must be an integer from 0 to ${MAX_U16}, got ${value}`);
  }
  return value;
}

function checkU32(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 0 || value > MAX_U32) {
    throw new RangeError(`${name} must be an integer from 0 to ${MAX_U32}, got ${value}`);
  }
  return value;
}

function checkU8(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 0 || value > 0xff) {
    throw new RangeError(`${name} must be an integer from 0 to 255, got ${value}`);
  }
  return value;
}

/** Writes one request frame, exactly as an old LockServer client would send it. */
export function encodeRequest(out: BufferWriter, request: Request): void {
  out.u8(request.command);
  switch (request.command) {
    case Command.FindOwner:
      out.string(request.key).string(request.index);
      return;
    case Command.Request:
    case Command.RequestFenced:
    case Command.AcquireWait:
      out
        .string(request.key)
        .string(request.index)
        .string(request.owner)
        .u16(checkU16('ttl', request.ttl))
        .u16(checkU16('ttw', request.ttw))
        .u8(checkU8('priority', request.priority));
      // Acquire and wait is a request with fence followed by its wait bound.
      if (request.command === Command.AcquireWait) out.u32(checkU32('waitMs', request.waitMs));
      return;
    case Command.FindLocation:
    case Command.Renew:
    case Command.Release:
    case Command.Fence:
    case Command.AwaitLoss:
      out.string(request.key).string(request.index).string(request.owner);
      return;
    case Command.ReleaseAll:
      out.string(request.owner);
      return;
    case Command.List:
    case Command.ListDetailed:
      out.string(request.key);
      return;
    case Command.Stats:
      return;
  }
}
