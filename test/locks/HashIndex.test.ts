import test from 'ava';
import { HashIndex, NO_ID, SHRINK_FLOOR } from '../../src/locks/HashIndex.js';
import { mulberry32 } from '../helpers/random.js';

/** The candidates first()/next() yield for `hash`: every id filed under it, and maybe others sharing its tag. */
function candidates(index: HashIndex, hash: number): number[] {
  const ids: number[] = [];
  for (let id = index.first(hash); id !== NO_ID; id = index.next(hash)) ids.push(id);
  return ids;
}

test('random adds and removes agree with a Map, through growth and shrinking, even when every hash collides', (t) => {
  // Few distinct hashes (and few distinct home slots) make long probe runs, where a removal must
  // shift later members back without losing any of them.
  for (const [seed, hashes] of [
    [1, 7],
    [2, 1],
    [3, 1000],
    [4, 2 ** 31],
  ] as const) {
    const random = mulberry32(seed);
    const model = new Map<number, number>(); // id → hash
    const index = new HashIndex((id) => model.get(id)!);
    let nextId = 0;
    let peak = 0;
    for (let step = 0; step < 6000; step++) {
      const growing = step < 3000;
      if (model.size === 0 || random() < (growing ? 0.7 : 0.3)) {
        const hash = (Math.floor(random() * hashes) * 0x9e3779b1) | 0;
        index.add(hash, nextId);
        model.set(nextId++, hash);
      } else {
        const ids = [...model.keys()];
        const id = ids[Math.floor(random() * ids.length)]!;
        index.remove(model.get(id)!, id);
        model.delete(id);
      }
      peak = Math.max(peak, index.capacity);
      t.is(index.size, model.size);
      if (step % 250 === 0 || step === 5999) {
        for (const hash of new Set(model.values())) {
          const expected = [...model]
            .filter(([, h]) => h === hash)
            .map(([id]) => id)
            .sort((a, b) => a - b);
          const found = candidates(index, hash);
          t.deepEqual(
            found.filter((id) => model.get(id) === hash).sort((a, b) => a - b),
            expected,
            `seed ${seed} step ${step}`,
          );
          t.is(new Set(found).size, found.length, 'no id twice');
        }
        t.deepEqual(
          candidates(index, 12345).filter((id) => model.get(id) === 12345),
          [],
          'a hash never filed finds nothing',
        );
      }
    }
    t.true(index.capacity >= model.size * 2, 'never more than half full');
    t.true(index.capacity < peak || peak <= SHRINK_FLOOR, `seed ${seed}: shrank after the removals (peak ${peak}, now ${index.capacity})`);
  }
});

test('removing an id that is not filed throws and changes nothing', (t) => {
  const index = new HashIndex(() => 5);
  index.add(5, 1);
  t.throws(() => index.remove(5, 2), { message: /id 2 is not filed/ });
  t.throws(() => index.remove(6, 1), { message: /id 1 is not filed/ });
  t.deepEqual(candidates(index, 5), [1]);
  t.is(index.size, 1);
});

test('an index emptied after a million adds is back to the size it shrinks to at most', (t) => {
  const hashOf = (id: number): number => Math.imul(id, 0x9e3779b1);
  const index = new HashIndex(hashOf);
  for (let id = 0; id < 1_000_000; id++) index.add(hashOf(id), id);
  t.true(index.capacity >= 2_000_000);
  for (let id = 0; id < 1_000_000; id++) index.remove(hashOf(id), id);
  t.is(index.size, 0);
  t.is(index.capacity, SHRINK_FLOOR);
});

test('a small index whose count swings up and down keeps its table: no resize per swing', (t) => {
  const hashOf = (id: number): number => Math.imul(id + 1, 0x9e3779b1) | 0;
  const index = new HashIndex(hashOf);
  for (let id = 0; id < 40; id++) index.add(hashOf(id), id);
  const grown = index.capacity;
  for (let swing = 0; swing < 100; swing++) {
    for (let id = 0; id < 38; id++) index.remove(hashOf(id), id);
    t.is(index.capacity, grown, 'not shrunk with 2 of 40 left');
    for (let id = 0; id < 38; id++) index.add(hashOf(id), id);
    t.is(index.capacity, grown);
  }
  t.deepEqual(
    candidates(index, hashOf(7)).filter((id) => hashOf(id) === hashOf(7)),
    [7],
  );
});

test('a candidate whose hash only shares the tag is rare: lookups pass over most other records unread', (t) => {
  const hashOf = (id: number): number => Math.imul(id + 1, 0x9e3779b1) | 0;
  const index = new HashIndex(hashOf);
  for (let id = 0; id < 10_000; id++) index.add(hashOf(id), id);
  let others = 0;
  for (let id = 0; id < 10_000; id++) others += candidates(index, hashOf(id)).filter((c) => c !== id).length;
  t.true(others < 10_000 / 8, `${others} foreign candidates over 10,000 lookups`);
});
