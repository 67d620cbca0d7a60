import test from 'ava';
import { runSimulation, SimulationFailure } from './Simulation.js';

/**
 * The seeded cluster simulation (see Simulation.ts): a bounded number of seeds in `npm test`;
 * `scripts/simulate` runs many more. A failing seed names the command that replays it.
 * SIM_SEEDS=a,b,c runs those seeds instead.
 */
const DEFAULT_SEEDS = Array.from({ length: 24 }, (_, i) => 1 + i);
const seeds = process.env.SIM_SEEDS?.split(',').map(Number) ?? DEFAULT_SEEDS;

for (const seed of seeds) {
  test(`seed ${seed}: replicas agree, S1 holds, acknowledged entries survive`, async (t) => {
    try {
      const report = await runSimulation({ seed });
      t.log(JSON.stringify(report));
      t.true(report.answered > 0, 'the clients were answered at all');
      t.true(report.crashes + report.leaderChanges > 0 || report.batches > 0);
    } catch (error) {
      if (error instanceof SimulationFailure) {
        t.fail(`${error.message}\nreplay: npm run build && scripts/simulate --seed ${seed}`);
      } else {
        throw error;
      }
    }
  });
}
