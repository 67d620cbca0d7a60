import test from 'ava';
import { PEER_VIEW_EVERY_MS, PeerRouting, type PeerChannel, type PeerView } from '../../src/cluster/PeerRouting.js';
import type { LocalSequencer } from '../../src/cluster/RoutedLog.js';
import type { Logger } from '../../src/runtime/Logger.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';

// Where a node's appends go: its own sequencer while it leads, the leader's declared address, or
// etcd; the declarations are read again every PEER_VIEW_EVERY_MS, and a failed read keeps the last.

class Dialler {
  readonly dialled: string[] = [];
  readonly closed: string[] = [];
  dial = (address: string): PeerChannel => {
    this.dialled.push(address);
    return { up: true, forward: () => Promise.reject(new Error('unused')), close: () => this.closed.push(address) };
  };
}

function setup(local?: LocalSequencer) {
  const vt = new VirtualTimers();
  const leadership: { isLeader: boolean; leader: string | undefined } = { isLeader: false, leader: undefined };
  let view: PeerView | Error = { peers: new Map(), readsBundles: false };
  const dialler = new Dialler();
  const events: string[] = [];
  const logger: Logger = { event: (name, fields) => events.push(`${name} ${fields?.via} (${fields?.why})`), debug: undefined };
  const routing = new PeerRouting(
    leadership,
    { peerView: () => (view instanceof Error ? Promise.reject(view) : Promise.resolve(view)) },
    dialler.dial,
    local,
    vt,
    logger,
  );
  return { vt, leadership, routing, dialler, events, setView: (v: PeerView | Error) => (view = v) };
}

const sequencer: LocalSequencer = { submit: () => Promise.reject(new Error('unused')) };

test('a follower forwards to the address the leader declared, one link per address, dropped when the leader moves or has none', async (t) => {
  const { vt, leadership, routing, dialler, events, setView } = setup(sequencer);
  leadership.leader = 'n1';
  setView({
    peers: new Map([
      ['n1', '10.0.0.1:7000'],
      ['n3', '10.0.0.3:7000'],
    ]),
    readsBundles: true,
  });
  t.is(routing.route().kind, 'direct', 'nothing read yet');
  routing.start();
  await vt.advance(0);
  const first = routing.route();
  t.is(first.kind, 'forward');
  const again = routing.route();
  t.true(first.kind === 'forward' && again.kind === 'forward' && again.channel === first.channel, 'the same link');
  t.deepEqual(dialler.dialled, ['10.0.0.1:7000'], 'one link, kept');
  leadership.leader = 'n3';
  t.is(routing.route().kind, 'forward');
  t.deepEqual(dialler.dialled, ['10.0.0.1:7000', '10.0.0.3:7000']);
  t.deepEqual(dialler.closed, ['10.0.0.1:7000'], 'the old leader’s link closed');
  leadership.leader = 'n2';
  t.is(routing.route().kind, 'direct', 'n2 declared no address');
  t.deepEqual(dialler.closed, ['10.0.0.1:7000', '10.0.0.3:7000']);
  t.deepEqual(events, [
    'append-route direct (peer addresses not read yet)',
    'append-route forward 10.0.0.1:7000 (leader n1)',
    'append-route forward 10.0.0.3:7000 (leader n3)',
    'append-route direct (leader n2 declared no peer address)',
  ]);
  routing.close();
});

test('the leader uses its own sequencer (its link to the leader before it closed), or appends directly when it has none', async (t) => {
  const withOne = setup(sequencer);
  withOne.leadership.leader = 'n2';
  withOne.setView({ peers: new Map([['n2', '10.0.0.2:7000']]), readsBundles: true });
  withOne.routing.start();
  await withOne.vt.advance(0);
  t.is(withOne.routing.route().kind, 'forward');
  withOne.leadership.isLeader = true;
  withOne.leadership.leader = 'n1';
  const route = withOne.routing.route();
  t.is(route.kind === 'here' ? route.sequencer : undefined, sequencer);
  t.deepEqual(withOne.dialler.closed, ['10.0.0.2:7000']);
  withOne.routing.close();
  const without = setup();
  without.leadership.isLeader = true;
  t.is(without.routing.route().kind, 'direct');
});

test('the declarations are read again every PEER_VIEW_EVERY_MS; a failed read keeps the last view; close stops the reads and the link', async (t) => {
  const { vt, leadership, routing, dialler, setView } = setup(sequencer);
  leadership.leader = 'n1';
  t.false(routing.readsBundles, 'not before a read says so');
  routing.start();
  await vt.advance(0);
  t.false(routing.readsBundles);
  setView({ peers: new Map([['n1', '10.0.0.1:7000']]), readsBundles: true });
  await vt.advance(PEER_VIEW_EVERY_MS);
  t.true(routing.readsBundles);
  t.is(routing.route().kind, 'forward');
  setView(new Error('etcd unreachable'));
  await vt.advance(PEER_VIEW_EVERY_MS);
  t.true(routing.readsBundles, 'kept');
  t.is(routing.route().kind, 'forward', 'kept');
  setView({ peers: new Map([['n1', '10.0.0.1:7000']]), readsBundles: false });
  await vt.advance(PEER_VIEW_EVERY_MS);
  t.false(routing.readsBundles, 'a node that does not read bundles joined');
  routing.close();
  t.deepEqual(dialler.closed, ['10.0.0.1:7000']);
  t.is(vt.pending, 0, 'no read scheduled after close');
});
