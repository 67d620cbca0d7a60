/**
 * The package's public surface: the client library, the wire codec it shares with the server,
 * and the server's building blocks for embedding.
 */

// Client library
export {
  LockClient,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_HOST,
  DEFAULT_MAX_IN_FLIGHT,
  DEFAULT_PRIORITY,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_TTL_SECONDS,
  DEFAULT_TTW_SECONDS,
} from './client/LockClient.js';
export type { AcquireOptions, DetailedEntry, DetailedQueue, ListedEntry, LockClientOptions, LockRequestOptions } from './client/LockClient.js';
export type { HostAndPort, HostOrder } from './client/hosts.js';
export { holdLock, withLock, HeldLock, DEFAULT_POLL_INITIAL_MS, DEFAULT_POLL_MAX_MS } from './client/holdLock.js';
export type { HoldLockOptions } from './client/holdLock.js';
export type { LockName, StringEncoding } from './client/lockName.js';
export * from './client/errors.js';
export { DEFAULT_PORT } from './defaultPort.js';

// Byte strings and the wire codec
export { asciiBytes, byteString, bytesOf, printable, MAX_STRING_LENGTH } from './bytes.js';
export type { ByteString } from './bytes.js';
export * from './protocol/constants.js';
export type { Contender, FencedPosition, Request, StatsReply } from './protocol/messages.js';
export { STATS_FIELDS } from './protocol/messages.js';
export { BufferWriter } from './protocol/BufferWriter.js';
export { encodeRequest } from './protocol/encodeRequest.js';
export { INCOMPLETE } from './protocol/framing.js';
export { decodeRequest, requestFrameLength, RequestDecoder, UnknownCommandError } from './protocol/decodeRequest.js';
export * from './protocol/encodeReply.js';
export { decodeReply, replyFrameLength, ReplyDecoder, NOT_YET } from './protocol/decodeReply.js';
export type { Reply, ReplyOf } from './protocol/decodeReply.js';

// Server building blocks
export type { LockService, LockCounts, LockRequest, SavedLock } from './locks/LockService.js';
export { LocalLockService } from './locks/LocalLockService.js';
export type { Clock } from './runtime/Clock.js';
export { systemClock } from './runtime/Clock.js';
export type { Timers } from './runtime/Timers.js';
export { realTimers } from './runtime/Timers.js';
export { LockServer } from './server/LockServer.js';
export type { LockServerOptions } from './server/LockServer.js';
export { Daemon, StartupError } from './server/Daemon.js';
export type { DaemonConfig, DaemonDeps } from './server/Daemon.js';
export { AllowList } from './server/AllowList.js';
export type { Logger, LogFields } from './runtime/Logger.js';
export { streamLogger, silentLogger } from './runtime/Logger.js';
export { ServerMetrics, STANDALONE } from './metrics/ServerMetrics.js';
export type { ClusterStatus, MetricsSource } from './metrics/ServerMetrics.js';
export { startMetricsEndpoint } from './metrics/metricsEndpoint.js';
export type { MetricsEndpoint } from './metrics/metricsEndpoint.js';
