import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { LockTable } from '../../src/locks/LockTable.js';
import { SingleNodeRules } from '../../src/locks/SingleNodeRules.js';
import { mulberry32 } from '../helpers/random.js';

test('the hash seed never shows: tables seeded differently answer alike, in the same order', (t) => {
  const random = mulberry32(3);
  const clock = new FakeClock(0);
  const seeds = [0, 1, 0x7fffffff, -0x80000000, 0x2545f491];
  const tables = seeds.map((hashSeed) => new LockTable(clock, new SingleNodeRules(), { hashSeed }));
  const alike = (f: (table: LockTable) => unknown, where: string): void => {
    const first = f(tables[0]!);
    for (const table of tables.slice(1)) t.deepEqual(f(table), first, where);
  };
  const name = (): string => String.fromCharCode(...Array.from({ length: Math.floor(random() * 4) }, () => Math.floor(random() * 3) * 0x7f));
  for (let step = 0; step < 2_000; step++) {
    const [key, index, owner] = [name(), name(), name()];
    const roll = random();
    if (roll < 0.5) {
      const [ttl, ttw, priority] = [Math.floor(random() * 3), Math.floor(random() * 3), Math.floor(random() * 3)];
      alike((table) => table.request({ key, index, owner, ttl, ttw, priority }), `step ${step}`);
    } else if (roll < 0.7) alike((table) => table.release(key, index, owner), `step ${step}`);
    else if (roll < 0.8) alike((table) => table.releaseAll(owner), `step ${step}`);
    else if (roll < 0.9) alike((table) => table.location(key, index, owner), `step ${step}`);
    else {
      clock.advance(500);
      alike((table) => table.expire(), `step ${step}`);
    }
  }
  alike((table) => [...table.snapshot()], 'the lock file lists the same entries in the same order');
});
