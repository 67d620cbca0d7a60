export { mulberry32 } from '../../src/runtime/Random.js';
