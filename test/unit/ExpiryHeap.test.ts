import test from 'ava';
import { ExpiryHeap, NOT_IN_HEAP, type Expiring } from '../../src/locks/ExpiryHeap.js';
import { mulberry32 } from '../helpers/random.js';

interface Item extends Expiring {
  id: number;
}

test('random schedules, reschedules and removals always pop in deadline order', (t) => {
  for (const seed of [1, 2, 3, 42, 1234]) {
    const random = mulberry32(seed);
    const heap = new ExpiryHeap<Item>();
    const live = new Set<Item>();
    for (let step = 0; step < 5000; step++) {
      const roll = random();
      if (roll < 0.5 || live.size === 0) {
        const item: Item = { id: step, deadline: Math.floor(random() * 1000), heapIndex: NOT_IN_HEAP };
        heap.schedule(item);
        live.add(item);
      } else if (roll < 0.75) {
        const item = [...live][Math.floor(random() * live.size)]!;
        item.deadline = Math.floor(random() * 1000);
        heap.schedule(item);
      } else {
        const item = [...live][Math.floor(random() * live.size)]!;
        heap.remove(item);
        t.is(item.heapIndex, NOT_IN_HEAP);
        live.delete(item);
      }
      t.is(heap.size, live.size);
    }
    const expected = [...live].map((i) => i.deadline).sort((a, b) => a - b);
    const popped: number[] = [];
    for (let next = heap.peek(); next !== undefined; next = heap.peek()) {
      popped.push(next.deadline);
      heap.remove(next);
    }
    t.deepEqual(popped, expected, `seed ${seed}`);
  }
});

test('removing an item that is not in the heap changes nothing', (t) => {
  const heap = new ExpiryHeap<Item>();
  const a: Item = { id: 1, deadline: 5, heapIndex: NOT_IN_HEAP };
  heap.remove(a);
  heap.schedule(a);
  heap.remove(a);
  heap.remove(a);
  t.is(heap.size, 0);
});
