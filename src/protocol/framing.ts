/**
 * What the request and the reply decoders share: how a frame's end is found in a stream whose
 * bytes may still be arriving. Frames carry no overall length; their extent follows from the
 * one-byte length of each string they hold and from the fixed fields around those strings.
 */
import { STRING_LENGTH_PREFIX } from './constants.js';

/** Returned by the frame-length functions while a frame is still arriving. */
export const INCOMPLETE = -1;

/**
 * Where the length-prefixed string whose length byte is at b[at] ends; past `end` (so the frame
 * reads as incomplete) when the length byte itself has not arrived.
 */
export function stringEnd(b: Buffer, at: number, end: number): number {
  return at < end ? at + STRING_LENGTH_PREFIX + b[at]! : end + 1;
}

/** Length of the frame b[start, frameEnd) once all of it has arrived (frameEnd <= end), else INCOMPLETE. */
export function wholeFrameLength(start: number, frameEnd: number, end: number): number {
  return frameEnd <= end ? frameEnd - start : INCOMPLETE;
}
