/**
 * The in-process harnesses' common frame (hotPath, connection, clusterNode): how long the work
 * takes in CPU time, not wall time (the machine may be shared), and `--ops N` for a fixed run.
 */

/** `--ops N` and what stands before it: N ops and exit, for an instruction count (see the README). */
export function opsArgument(args: readonly string[]): { readonly fixedOps: number | undefined; readonly rest: readonly string[] } {
  const at = args.indexOf('--ops');
  return at < 0 ? { fixedOps: undefined, rest: args } : { fixedOps: Number(args[at + 1]), rest: args.slice(0, at) };
}

/** CPU ns (user and system) this process has used since the call. */
export function cpuClock(): () => number {
  const started = process.cpuUsage();
  return () => {
    const used = process.cpuUsage(started);
    return (used.user + used.system) * 1000;
  };
}

/** Median and best of five rounds of `roundMs` CPU ms each, after a warm-up of `warmUpMs`: CPU ns per op. */
export async function cpuNsPerOp(
  /** Some work; `ops()` counts what it did. A step should be long beside a clock reading (hundreds of ops). */
  step: () => void | Promise<void>,
  ops: () => number,
  warmUpMs: number,
  roundMs: number,
): Promise<{ readonly nsPerOp: number; readonly nsPerOpBest: number }> {
  const round = async (ms: number): Promise<number> => {
    const cpuNs = cpuClock();
    const from = ops();
    while (cpuNs() < ms * 1e6) await step();
    return cpuNs() / (ops() - from);
  };
  await round(warmUpMs); // JIT, tables at their steady size
  const rounds: number[] = [];
  for (let r = 0; r < 5; r++) rounds.push(await round(roundMs));
  rounds.sort((a, b) => a - b);
  return { nsPerOp: Math.round(rounds[2]!), nsPerOpBest: Math.round(rounds[0]!) };
}
