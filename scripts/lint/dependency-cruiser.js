// Layering of src/: each floor imports only the floors below it, never a floor above, never a
// neighbour on its own floor, and nothing imports in a circle. See README.md beside this file.

/** Floors, top to bottom; each entry is a folder of src/. */
const FLOORS = [
  ['cli'],
  // Metrics observe the server and the cluster (their stats and observer hooks), so they sit above both.
  ['metrics'],
  // The daemon picks the lock service (the local table, or the cluster) and serves it.
  ['server'],
  // Each a user of the lock table's records: replicated (cluster), asked for over the wire (client),
  // saved and loaded (files).
  ['cluster', 'client', 'files'],
  ['locks'],
  ['protocol'],
  // The ground floor: what is injected (runtime/) and the leaf modules at the root of src/ that
  // need nothing but Node (byte strings, the default port, where the package is and its version).
  ['runtime'],
];
const GROUND_FILES = ['bytes', 'defaultPort', 'packageRoot', 'packageVersion'];

const folder = (names) => `^src/(${names.join('|')})/`;

/** One rule per folder: no import of a folder above it or beside it. */
const layerRules = FLOORS.flatMap((floor, level) => {
  const above = FLOORS.slice(0, level).flat();
  return floor.map((name) => ({
    name: `layer-${name}`,
    comment: `src/${name}/ may import only the floors below it`,
    severity: 'error',
    from: { path: `^src/${name}/` },
    to: { path: folder([...above, ...floor.filter((other) => other !== name)]) },
  }));
});

export default {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'A circle makes the load order matter and the modules one unit: cut it.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'ground-files',
      comment: `src/{${GROUND_FILES.join(',')}}.ts are the ground floor: they import only each other`,
      severity: 'error',
      from: { path: `^src/(${GROUND_FILES.join('|')})\\.ts$` },
      to: { path: '^src/', pathNot: `^src/(${GROUND_FILES.join('|')})\\.ts$` },
    },
    {
      name: 'no-package-entry',
      comment: 'src/index.ts is the package entry for users: nothing inside src imports it',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^src/index\\.ts$' },
    },
    {
      name: 'src-not-to-tests-or-scripts',
      comment: 'The product never imports test code, test doubles or tooling (they are not published)',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|scripts)/' },
    },
    {
      name: 'src-not-to-dev-dependencies',
      comment: 'A package the product imports at run time must be in dependencies, or installs break',
      severity: 'error',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev', 'npm-no-pkg', 'npm-unknown'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'src-no-sync-fs',
      comment:
        'The server does its file I/O through node:fs/promises so a slow disk never stalls the event loop; ' +
        'packageVersion.ts reads package.json once while the module loads, before anything serves',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/packageVersion\\.ts$' },
      to: { dependencyTypes: ['core'], path: '^(node:)?fs$' },
    },
    {
      name: 'no-unresolvable',
      comment: 'An import that does not resolve is a typo or a missing package',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    combinedDependencies: false,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
  },
};
