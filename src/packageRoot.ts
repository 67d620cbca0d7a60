import { fileURLToPath } from 'node:url';

/** The package's root folder (this file is compiled to <root>/dist/src/packageRoot.js). */
export const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));
