import { spawnSync } from 'node:child_process';

/**
 * Runs one iproute2/nft command synchronously (each takes a few ms) and throws with its stderr
 * when it fails. Synchronous on purpose: the same calls run from a process 'exit' hook.
 */
export function run(command: string, args: readonly string[], { allowFailure = false } = {}): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error !== undefined && !allowFailure) throw new Error(`${command} ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0 && !allowFailure) {
    throw new Error(`${command} ${args.join(' ')} exited ${result.status}: ${result.stderr.trim()}`);
  }
  return result.stdout ?? '';
}

/** `ip …` in the namespace `ns` (the root namespace when undefined). */
export function ip(ns: string | undefined, ...args: string[]): string {
  return run('ip', ns === undefined ? args : ['-n', ns, ...args]);
}

/** A command run inside the namespace `ns` (`ip netns exec`). */
export function inNamespace(ns: string | undefined, command: string, args: readonly string[], options = {}): string {
  return ns === undefined ? run(command, args, options) : run('ip', ['netns', 'exec', ns, command, ...args], options);
}

/**
 * Why these tests cannot run here, or undefined when they can: namespaces, veth links and qdiscs
 * need root and iproute2.
 */
export function netnsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not running as root (network namespaces need root)';
  if (spawnSync('ip', ['-V'], { stdio: 'ignore' }).status !== 0) return '`ip` (iproute2) is not on the PATH';
  if (spawnSync('tc', ['-V'], { stdio: 'ignore' }).status !== 0) return '`tc` (iproute2) is not on the PATH';
  return undefined;
}
