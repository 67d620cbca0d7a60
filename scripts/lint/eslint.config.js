// ESLint for src/, test/ and scripts/: typescript-eslint's strict type-checked rules, tuned where
// a rule fights code written that way on purpose (each such line says why). See README.md here.
import { resolve } from 'node:path';
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

const root = resolve(import.meta.dirname, '../..');

/** Type-aware rules for the TypeScript of src/, test/ and scripts/ (one program: tsconfig.json). */
const typescript = {
  files: ['**/*.ts'],
  extends: [tseslint.configs.strictTypeChecked],
  languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: root } },
  linterOptions: { reportUnusedDisableDirectives: 'error' },
  rules: {
    // Rules that catch real bugs, beyond the preset.
    '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
    eqeqeq: 'error',

    // Tuned: an index the code's invariants keep in range is asserted with `!` (the compiler
    // checks indexed access, noUncheckedIndexedAccess); the hot path takes no run-time check.
    '@typescript-eslint/no-non-null-assertion': 'off',
    // Tuned: numbers and booleans print as they should in messages and log lines.
    '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
    // Tuned: `() => resolve(x)` and `return finish(error)` in a void callback are the house style.
    '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true, ignoreVoidReturningFunctions: true }],
    // Off: an async method with no await implements a Promise-returning interface (LockService,
    // Target) so that a throw arrives as a rejection, as it does from the other implementations.
    '@typescript-eslint/require-await': 'off',
    // Off: about half of its findings were flags that a callback or a called method changes
    // (`while (!stop)`, the connection's read loop), which TypeScript's narrowing cannot see;
    // the rest were harmless redundancy.
    '@typescript-eslint/no-unnecessary-condition': 'off',
    // Tuned: an abort reason or a caught value passes on as it came, like `throw` (only-throw-error).
    '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
    // Tuned: a `let` that a callback reads before its one assignment cannot be a `const`.
    'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    // Tuned: `const { dropped, ...kept } = x` is how a field is left out of a copy.
    '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
    // Off: the protocol checks byte ranges with classes such as /[^\x00-\xff]/ on purpose.
    'no-control-regex': 'off',
    // Off: an error rethrown with our own message already carries the cause's text, and a
    // `cause` would change what the operator sees when it is printed.
    'preserve-caught-error': 'off',
  },
};

export default defineConfig({ ignores: ['dist/**', 'node_modules/**'] }, js.configs.recommended, typescript);
