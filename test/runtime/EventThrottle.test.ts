import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { EventThrottle } from '../../src/runtime/EventThrottle.js';

test('a burst passes, the rest of the window is counted, and the next line reports it', (t) => {
  const clock = new FakeClock();
  const throttle = new EventThrottle(clock, 3, 1000);
  t.deepEqual(
    [1, 2, 3].map(() => throttle.admit('refused')),
    [0, 0, 0],
  );
  t.is(throttle.admit('refused'), undefined);
  t.is(throttle.admit('refused'), undefined);
  t.is(throttle.admit('other'), 0, 'each kind has its own allowance');
  clock.advance(1000);
  t.is(throttle.admit('refused'), 2, 'two were suppressed since the last line');
  t.is(throttle.admit('refused'), 0);
});
