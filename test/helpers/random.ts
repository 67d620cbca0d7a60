export { mulberry32 } from '../../src/cluster/random.js';
