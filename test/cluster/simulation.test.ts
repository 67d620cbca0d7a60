import test from 'ava';
import { runSimulation, SimulationFailure, type SimulationOptions } from './Simulation.js';

/**
 * The seeded cluster simulation (see Simulation.ts): a bounded number of seeds in `npm test`;
 * `scripts/simulate` runs many more. A failing seed names the command that replays it.
 * SIM_SEEDS=a,b,c runs those seeds instead (with every fault). Seeds run one after another (serial):
 * run together they share one thread and none would finish within ava's timeout.
 *
 * Every fault, compaction by another cluster sharing the etcd included, on 40 seeds: they must
 * pass. (Seeds 9, 12, 14, 17, 18, 20, 23 and 25 left nodes unready for good, acknowledged batches
 * lost, until every batch was also retained under a key of its own: see ReplicatedLog.since.)
 */
const SEEDS = Array.from({ length: 40 }, (_, i) => 1 + i);
/**
 * Seeds outside that range that once failed, run beside it so they stay covered. 193: a node whose
 * own etcd member was cut off answered a read with its batch, which the leader's sequencer had
 * committed; the check took the node for one that reached no leader. 1953: a wait bound on a node
 * whose clock runs 3% slow passed late in true time; the check must count the bound as the node does.
 */
const REGRESSION_SEEDS = [193, 1953];
const chosen = process.env.SIM_SEEDS?.split(',').map(Number);
/** Over the seeds run: crashed incarnations whose waits a CancelWaitsOf ended, and waits tied to a dead one that were watched. */
const phantoms = { ended: 0, watched: 0 };

async function simulate(t: import('ava').ExecutionContext, options: SimulationOptions, replay: string): Promise<void> {
  try {
    const report = await runSimulation(options);
    t.log(JSON.stringify(report));
    t.true(report.answered > 0, 'the clients were answered at all');
    t.true(report.crashes + report.leaderChanges > 0 || report.batches > 0);
    t.true(report.deadIncarnationsEnded <= report.deadIncarnations);
    phantoms.ended += report.deadIncarnationsEnded;
    phantoms.watched += report.phantomWaitsSeen;
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
  for (const seed of [...SEEDS, ...REGRESSION_SEEDS]) {
    test.serial(`seed ${seed}: replicas agree, S1 holds, clients are told the truth, acknowledged entries survive`, (t) =>
      simulate(t, { seed }, `scripts/simulate --seed ${seed}`),
    );
  }
  // The property "no entry of a dead incarnation is granted after its cancel could have been
  // proposed" (Simulation.checkPhantoms) is checked only where such waits exist: the seeds must make some.
  test.serial('the seeds crashed nodes with clients waiting through them, and their waits were ended', (t) => {
    t.true(phantoms.ended > 0, `${phantoms.ended} dead incarnations' waits ended`);
    t.true(phantoms.watched > 0, `${phantoms.watched} waits tied to a dead incarnation watched`);
  });
}
