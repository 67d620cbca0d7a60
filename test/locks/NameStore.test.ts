import test from 'ava';
import { NameStore } from '../../src/locks/NameStore.js';
import { mulberry32 } from '../helpers/random.js';

test('every length 0–255 and every byte value comes back exactly, and compares only with itself', (t) => {
  const store = new NameStore();
  const names: string[] = [];
  for (let length = 0; length <= 255; length++) {
    let name = '';
    for (let i = 0; i < length; i++) name += String.fromCharCode((length * 31 + i * 7) & 0xff);
    names.push(name);
  }
  names.push('\x00', '\xff', '\xff\xff');
  const handles = names.map((name) => store.add(name));
  names.forEach((name, i) => {
    t.is(store.toString(handles[i]!), name);
    t.true(store.equals(handles[i]!, name));
    t.false(store.equals(handles[i]!, name + '\x00'), 'one byte longer');
    if (name.length > 0) t.false(store.equals(handles[i]!, name.slice(0, -1) + String.fromCharCode(name.charCodeAt(name.length - 1) ^ 1)), 'last byte differs');
  });
});

test('freed slots are reused, and names stored over them are intact', (t) => {
  const random = mulberry32(5);
  const store = new NameStore();
  const live = new Map<number, string>();
  for (let step = 0; step < 20_000; step++) {
    if (live.size === 0 || random() < 0.55) {
      const length = Math.floor(random() * random() * 256);
      let name = '';
      for (let i = 0; i < length; i++) name += String.fromCharCode(Math.floor(random() * 256));
      const handle = store.add(name);
      t.false(live.has(handle), 'a handle in use is never handed out twice');
      live.set(handle, name);
    } else {
      const handles = [...live.keys()];
      const handle = handles[Math.floor(random() * handles.length)]!;
      store.remove(handle);
      live.delete(handle);
    }
  }
  for (const [handle, name] of live) t.is(store.toString(handle), name);
  const bytesWhenFull = store.pageBytes;
  for (const handle of [...live.keys()]) store.remove(handle);
  for (const [, name] of live) store.add(name);
  t.is(store.pageBytes, bytesWhenFull, 'the same names again fit in the slots they left');
});
