import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { LockTable } from '../../src/locks/LockTable.js';
import { SingleNodeRules } from '../../src/locks/SingleNodeRules.js';
import { mulberry32 } from '../helpers/random.js';

/**
 * A deliberately naive model of the lock semantics (arrays, linear scans, expiry checked by brute
 * force). Random operations run against it and the real table must answer identically.
 */
interface ModelEntry {
  key: string;
  index: string;
  owner: string;
  priority: number;
  ttl: number;
  ttw: number;
  arrival: number;
  isOwner: boolean;
  deadline: number;
}

class Model {
  entries: ModelEntry[] = [];
  arrival = 0;
  constructor(private readonly clock: FakeClock) {}

  private queue(key: string, index: string): ModelEntry[] {
    const q = this.entries.filter((e) => e.key === key && e.index === index);
    const waiters = q.filter((e) => !e.isOwner).sort((a, b) => b.priority - a.priority || a.arrival - b.arrival);
    return [...q.filter((e) => e.isOwner), ...waiters];
  }

  private deadlineFor(e: ModelEntry): number {
    const s = e.isOwner ? e.ttl : e.ttw;
    return s === 0 ? Infinity : this.clock.now() + s * 1000;
  }

  private remove(e: ModelEntry): void {
    this.entries = this.entries.filter((x) => x !== e);
    if (!e.isOwner) return;
    // The first waiter whose wait has not run out takes the lock; expired ones go.
    for (let next = this.queue(e.key, e.index)[0]; next !== undefined; next = this.queue(e.key, e.index)[0]) {
      if (next.deadline > this.clock.now()) {
        next.isOwner = true;
        next.deadline = this.deadlineFor(next);
        return;
      }
      this.entries = this.entries.filter((x) => x !== next);
    }
  }

  expire(): void {
    for (;;) {
      const due = this.entries.filter((e) => e.deadline <= this.clock.now()).sort((a, b) => a.deadline - b.deadline)[0];
      if (due === undefined) return;
      this.remove(due);
    }
  }

  request(key: string, index: string, owner: string, ttl: number, ttw: number, priority: number, create: boolean): number {
    const existing = this.entries.find((e) => e.key === key && e.index === index && e.owner === owner);
    if (existing) {
      existing.ttl = ttl;
      existing.ttw = ttw;
      existing.deadline = this.deadlineFor(existing);
      return this.location(key, index, owner);
    }
    if (!create) return 0;
    const e: ModelEntry = { key, index, owner, priority, ttl, ttw, arrival: this.arrival++, isOwner: this.queue(key, index).length === 0, deadline: 0 };
    e.deadline = this.deadlineFor(e);
    this.entries.push(e);
    return this.location(key, index, owner);
  }

  location(key: string, index: string, owner: string): number {
    return this.queue(key, index).findIndex((e) => e.owner === owner) + 1;
  }

  findOwner(key: string, index: string): string {
    return this.queue(key, index)[0]?.owner ?? '';
  }

  renew(key: string, index: string, owner: string): boolean {
    const e = this.entries.find((x) => x.key === key && x.index === index && x.owner === owner);
    if (e) e.deadline = this.deadlineFor(e);
    return e !== undefined;
  }

  release(key: string, index: string | undefined, owner: string | undefined): number {
    const victims = this.entries.filter((e) => (key === undefined || e.key === key) && (index === undefined || e.index === index) && e.owner === owner);
    for (const v of victims) this.remove(v);
    return victims.length;
  }

  releaseAll(owner: string): number {
    const victims = this.entries.filter((e) => e.owner === owner);
    for (const v of victims) this.remove(v);
    return victims.length;
  }

  /** Per index in creation order is the table's choice; compare as sorted per-index queues. */
  list(key: string): string[] {
    const indexes = [...new Set(this.entries.filter((e) => e.key === key).map((e) => e.index))].sort();
    return indexes.flatMap((i) => this.queue(key, i).map((e) => `${i}/${e.owner}/${e.priority}/${e.ttl}/${e.ttw}/${e.isOwner}`));
  }
}

function sortedList(table: LockTable, key: string): string[] {
  const byIndex = new Map<string, string[]>();
  for (const c of table.list(key)) {
    const lines = byIndex.get(c.index) ?? [];
    lines.push(`${c.index}/${c.owner}/${c.priority}/${c.ttl}/${c.ttw}/${c.isOwner}`);
    byIndex.set(c.index, lines);
  }
  return [...byIndex.keys()].sort().flatMap((i) => byIndex.get(i)!);
}

for (const seed of [1, 7, 99, 2024, 31337]) {
  test(`random operations agree with the naive model (seed ${seed})`, (t) => {
    const random = mulberry32(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const clock = new FakeClock(0);
    const table = new LockTable(clock, new SingleNodeRules());
    const model = new Model(clock);
    const keys = ['a', 'b', '\xff'];
    const indexes = ['1', '2', ''];
    const owners = ['x', 'y', 'z', 'w', '\x00'];
    const draining = () => random() < 0.1;
    for (let step = 0; step < 3000; step++) {
      const [k, i, o] = [pick(keys), pick(indexes), pick(owners)];
      const op = random();
      const where = `seed ${seed} step ${step}`;
      if (op < 0.35) {
        const ttl = pick([0, 1, 2, 5]);
        const ttw = pick([0, 1, 3]);
        const priority = pick([0, 1, 5, 255]);
        const create = !draining();
        t.is(table.request({ key: k, index: i, owner: o, ttl, ttw, priority }, create), model.request(k, i, o, ttl, ttw, priority, create), where);
      } else if (op < 0.45) {
        t.is(table.location(k, i, o), model.location(k, i, o), where);
      } else if (op < 0.5) {
        t.is(table.findOwner(k, i), model.findOwner(k, i), where);
      } else if (op < 0.6) {
        t.is(table.renew(k, i, o), model.renew(k, i, o), where);
      } else if (op < 0.7) {
        t.is(table.release(k, i, o), model.release(k, i, o), where);
      } else if (op < 0.74) {
        t.is(table.releaseKey(k, o), model.release(k, undefined, o), where);
      } else if (op < 0.77) {
        t.is(table.releaseAll(o), model.releaseAll(o), where);
      } else {
        clock.advance(pick([100, 500, 1000, 2500]));
        table.expire();
        model.expire();
      }
      if (step % 50 === 0) {
        for (const key of keys) t.deepEqual(sortedList(table, key), model.list(key), where);
        t.is(table.owners, model.entries.filter((e) => e.isOwner).length);
        t.is(table.waiters, model.entries.filter((e) => !e.isOwner).length);
      }
    }
  });
}
