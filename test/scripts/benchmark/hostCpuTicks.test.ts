import test from 'ava';
import { cpuBetween, parseHostCpuTicks, stolenShare } from '../../../scripts/benchmark/processes.js';

const PROC_STAT = ['cpu  1547790 0 134321 2275080 4646 0 28874 3121 0 0', 'cpu0 773895 0 67160 1137540 2323 0 14437 1560 0 0', 'intr 123 0 0'].join('\n');

test('the machine line of /proc/stat gives all ticks of its first eight fields and the stolen ones', (t) => {
  t.deepEqual(parseHostCpuTicks(PROC_STAT), { total: 1547790 + 134321 + 2275080 + 4646 + 28874 + 3121, stolen: 3121 });
  t.deepEqual(parseHostCpuTicks('cpu 1 2 3 4 5 6 7 8'), { total: 36, stolen: 8 }, 'no guest fields, no newline');
});

test('anything but the machine line is no reading', (t) => {
  t.is(parseHostCpuTicks(''), undefined);
  t.is(parseHostCpuTicks('cpu0 1 2 3 4 5 6 7 8\ncpu 1 2 3 4 5 6 7 8'), undefined, 'a single CPU line first');
  t.is(parseHostCpuTicks('cpu 1 2 3 4 5 6 7'), undefined, 'a kernel without steal');
  t.is(parseHostCpuTicks('cpu 1 2 3 x 5 6 7 8'), undefined);
});

test('the stolen share is the stolen ticks over all ticks between two readings', (t) => {
  t.is(stolenShare({ total: 1000, stolen: 10 }, { total: 1400, stolen: 40 }), 30 / 400);
  t.is(stolenShare({ total: 1000, stolen: 10 }, { total: 1000, stolen: 10 }), undefined, 'no time passed');
  t.is(stolenShare(undefined, { total: 1400, stolen: 40 }), undefined);
  t.is(stolenShare({ total: 1000, stolen: 10 }, undefined), undefined);
});

test('between two readings each process gets its share of one core, and the machine its stolen share', (t) => {
  const before = { seconds: [10, undefined, 4], host: { total: 1000, stolen: 10 } };
  const after = { seconds: [12, 7, undefined], host: { total: 1400, stolen: 40 } };
  t.deepEqual(cpuBetween(before, after, 4), { cores: [0.5, undefined, undefined], stolen: 30 / 400 });
  t.deepEqual(cpuBetween(before, after, 0).cores, [undefined, undefined, undefined], 'no time passed');
  t.is(cpuBetween({ ...before, host: undefined }, after, 4).stolen, undefined, 'off Linux');
});
