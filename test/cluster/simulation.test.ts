import test from 'ava';
import { runSimulation, SimulationFailure, type SimulationOptions } from './Simulation.js';

/**
 * The seeded cluster simulation (see Simulation.ts): a bounded number of seeds in `npm test`;
 * `scripts/simulate` runs many more. A failing seed names the command that replays it.
 * SIM_SEEDS=a,b,c runs those seeds instead (with every fault). Seeds run one after another (serial):
 * run together they share one thread and none would finish within ava's timeout.
 *
 * Every fault but compaction by another cluster, on 32 seeds: these must pass. Compaction by
 * another cluster sharing the etcd, with every other fault, on 8 more seeds: the cluster cannot
 * survive it yet (history after the last snapshot lives only in the log key's history, which
 * that compaction destroys: nodes stay unready, acknowledged batches are lost), so those seeds
 * are expected to fail; once one passes, ava says so, and it moves to the first group.
 */
const SOAK_SEEDS = Array.from({ length: 32 }, (_, i) => 1 + i);
/** Seeds that end with nodes never ready again after another cluster's compaction (checked with fixes for defects a–c). */
const FOREIGN_COMPACTION_SEEDS = [9, 12, 14, 17, 18, 20, 23, 25];
const chosen = process.env.SIM_SEEDS?.split(',').map(Number);

async function simulate(t: import('ava').ExecutionContext, options: SimulationOptions, replay: string): Promise<void> {
  try {
    const report = await runSimulation(options);
    t.log(JSON.stringify(report));
    t.true(report.answered > 0, 'the clients were answered at all');
    t.true(report.crashes + report.leaderChanges > 0 || report.batches > 0);
  } catch (error) {
    if (error instanceof SimulationFailure) {
      t.fail(`${error.message}\nreplay: npm run build && ${replay}`);
    } else {
      throw error;
    }
  }
}

if (chosen !== undefined) {
  for (const seed of chosen) {
    test.serial(`seed ${seed}: every fault`, (t) => simulate(t, { seed }, `scripts/simulate --seed ${seed}`));
  }
} else {
  for (const seed of SOAK_SEEDS) {
    test.serial(`seed ${seed}: replicas agree, S1 holds, clients are told the truth, acknowledged entries survive`, (t) =>
      simulate(t, { seed, foreignCompaction: false }, `scripts/simulate --seed ${seed} --no-foreign-compaction`));
  }
  for (const seed of FOREIGN_COMPACTION_SEEDS) {
    test.serial.failing(`seed ${seed} with compaction by another cluster (not survived yet)`, (t) => simulate(t, { seed }, `scripts/simulate --seed ${seed}`));
  }
}
