import test from 'ava';
import { MAX_PENDING_VACANCIES, VacancyQueue } from '../../src/locks/VacancyQueue.js';

test('items come due oldest first, up to the cutoff and the budget', (t) => {
  const q = new VacancyQueue<string>();
  q.offer('a', 10);
  q.offer('b', 20);
  q.offer('c', 30);
  const due: Array<[string, number]> = [];
  const collect = (item: string, since: number): void => void due.push([item, since]);
  t.is(q.drain(5, 10, collect), 0);
  t.is(q.drain(25, 1, collect), 1);
  t.is(q.drain(25, 10, collect), 1);
  t.deepEqual(due, [['a', 10], ['b', 20]]);
  t.is(q.size, 1);
  t.is(q.drain(Number.POSITIVE_INFINITY, 10, collect), 1);
  t.is(q.size, 0);
});

test('a full queue refuses, so the caller deletes at once', (t) => {
  const q = new VacancyQueue<number>();
  for (let i = 0; i < MAX_PENDING_VACANCIES; i++) t.true(q.offer(i, 0) || i < 0);
  t.false(q.offer(-1, 0));
  t.is(q.drain(0, 10_000, () => {}), 10_000);
  t.true(q.offer(-1, 0), 'room again after draining');
});

test('draining many keeps order across the compaction of the arrays', (t) => {
  const q = new VacancyQueue<number>();
  for (let i = 0; i < 20_000; i++) q.offer(i, i);
  const seen: number[] = [];
  for (let round = 0; round < 10; round++) {
    q.drain(Number.POSITIVE_INFINITY, 3_000, (item) => void seen.push(item));
    q.offer(20_000 + round, 1e9);
  }
  q.drain(Number.POSITIVE_INFINITY, 3_000, (item) => void seen.push(item));
  t.is(q.size, 0);
  t.deepEqual(seen, Array.from({ length: 20_010 }, (_, i) => i));
});
