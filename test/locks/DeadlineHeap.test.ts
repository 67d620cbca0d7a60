import test from 'ava';
import { DeadlineHeap, NO_DEADLINE } from '../../src/locks/DeadlineHeap.js';
import { NO_ID } from '../../src/locks/HashIndex.js';
import { mulberry32 } from '../helpers/random.js';

test('random schedules, reschedules and removals always pop in deadline order', (t) => {
  for (const seed of [1, 2, 3, 42, 1234]) {
    const random = mulberry32(seed);
    const heap = new DeadlineHeap();
    const live = new Map<number, number>(); // id → deadline
    for (let step = 0; step < 5000; step++) {
      const roll = random();
      const ids = [...live.keys()];
      if (roll < 0.5 || live.size === 0) {
        // Ids are reused after removal, as the lock table's are.
        let id = Math.floor(random() * 3000);
        while (live.has(id)) id = (id + 1) % 3000;
        const deadline = Math.floor(random() * 1000);
        heap.schedule(id, deadline);
        live.set(id, deadline);
      } else if (roll < 0.75) {
        const id = ids[Math.floor(random() * ids.length)]!;
        const deadline = Math.floor(random() * 1000);
        heap.schedule(id, deadline);
        live.set(id, deadline);
      } else {
        const id = ids[Math.floor(random() * ids.length)]!;
        heap.remove(id);
        t.false(heap.has(id));
        t.is(heap.deadlineOf(id), NO_DEADLINE);
        live.delete(id);
      }
      t.is(heap.size, live.size);
    }
    for (const [id, deadline] of live) t.is(heap.deadlineOf(id), deadline);
    const expected = [...live.values()].sort((a, b) => a - b);
    const popped: number[] = [];
    for (let id = heap.peekId(); id !== NO_ID; id = heap.peekId()) {
      t.is(heap.peekDeadline(), live.get(id)!);
      popped.push(live.get(id)!);
      heap.remove(id);
    }
    t.deepEqual(popped, expected, `seed ${seed}`);
    t.is(heap.peekDeadline(), NO_DEADLINE);
  }
});

test('removing an id that is not in the heap changes nothing', (t) => {
  const heap = new DeadlineHeap();
  heap.remove(7);
  heap.remove(1_000_000);
  heap.schedule(7, 5);
  heap.remove(7);
  heap.remove(7);
  t.is(heap.size, 0);
  t.false(heap.has(1_000_000));
});
