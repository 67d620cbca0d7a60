/**
 * Operational log: one line per notable event, `ts=… event=… key=value …`, stable for scripts.
 * The chatty -d messages go through debug(), which is undefined when -d is off, so callers write
 * `log.debug?.(…)` and pay nothing (not even building the message) on the hot path.
 */
export type LogFields = Readonly<Record<string, string | number | boolean | undefined>>;

export interface Logger {
  event(name: string, fields?: LogFields): void;
  readonly debug: ((message: string) => void) | undefined;
}

function formatValue(value: string | number | boolean): string {
  const text = String(value);
  return /^[A-Za-z0-9_.:/@+-]+$/.test(text) ? text : JSON.stringify(text);
}

export function formatEvent(name: string, fields: LogFields = {}, at = new Date()): string {
  let line = `ts=${at.toISOString()} event=${name}`;
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined) line += ` ${key}=${formatValue(value)}`;
  }
  return line;
}

export function streamLogger(write: (line: string) => void, debug: boolean): Logger {
  return {
    event: (name, fields) => write(formatEvent(name, fields) + '\n'),
    debug: debug ? (message) => write(`lockserver: ${message}\n`) : undefined,
  };
}

export const silentLogger: Logger = { event: () => {}, debug: undefined };
