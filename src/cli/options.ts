import { isIP } from 'node:net';
import { InvalidArgumentError } from 'commander';

/** Parsers for command-line values; each throws InvalidArgumentError with a one-line reason. */

export function integerIn(min: number, max: number): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (!/^-?\d+$/.test(value.trim())) throw new InvalidArgumentError(`"${value}" is not a whole number from ${min} to ${max}.`);
    if (parsed < min || parsed > max) throw new InvalidArgumentError(`${value.trim()} is not between ${min} and ${max}.`);
    return parsed;
  };
}

export const parsePort = integerIn(0, 65535);

export function parseListenAddress(value: string): string {
  if (isIP(value) !== 0 || /^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/.test(value)) return value;
  throw new InvalidArgumentError(`"${value}" is not an IP address or host name.`);
}

export function parseFileName(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('an empty file name.');
  return value;
}
