import type { Implementation, TestFn } from 'ava';
import { etcdAvailable } from '../etcdCluster.js';
import { netnsUnavailable } from './ip.js';

/**
 * `test.serial` for tests that build network namespaces and run etcd in them. They need root,
 * iproute2 and etcd; without them they are skipped with a note that says why, except under CI
 * (CI=true, where they run as root), where each fails instead: CI must not pass untested.
 */
export function needsNetns(test: TestFn): (title: string, implementation: Implementation<[]>) => void {
  const missing = netnsUnavailable() ?? (etcdAvailable() ? undefined : '`etcd` is not on the PATH (apt-get install -y etcd-server)');
  if (missing === undefined) return (title, implementation) => test.serial(title, implementation);
  if (process.env.CI === 'true') return (title) => test.serial(title, (t) => t.fail(`CI=true but the network nemesis cannot run: ${missing}`));
  console.log(`\n  Network nemesis tests SKIPPED: ${missing}.\n`);
  return (title, implementation) => test.serial.skip(title, implementation);
}
