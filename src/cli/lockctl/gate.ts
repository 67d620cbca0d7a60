/**
 * The gate between `lockctl hold` and its command. The command is started while lockctl waits
 * for the lock, behind a shell (TRAMPOLINE) that blocks reading its fd 3: a pipe whose other end
 * is lockctl's. At the grant lockctl writes the fencing token down it and the shell execs the
 * command: starting a process (some milliseconds) is off the way from the grant to the command,
 * and no process but the command's is woken on the way. lockctl gone or giving up, the pipe ends
 * unwritten and the shell exits without running anything.
 *
 * The pipe is the watchdog's fd GATE_FD (lockctl spawns it with that extra pipe), passed on to the
 * shell as its fd 3; the shell's fd 4 is a pipe to the watchdog, which hears there that the
 * command was not found (127) or found on the PATH but not executable (126), so that these are
 * told apart from a command that itself exits 127 or 126.
 */

/** The gate in the watchdog: after stdin, stdout, stderr and the IPC channel. */
export const GATE_FD = 4;

/** Written down the gate for a lock without a fencing token (a 0.9b server): LOCKCTL_TOKEN unset. */
export const GATE_NO_TOKEN = '-';

/** What goes down the gate: the token, or GATE_NO_TOKEN, and a line end. */
export function gateLine(token: number | undefined): string {
  return `${token ?? GATE_NO_TOKEN}\n`;
}

/** `sh -c TRAMPOLINE lockctl-hold FILE [ARGS…]`, with the gate as fd 3 and the not-found pipe as fd 4. */
export const TRAMPOLINE = [
  'IFS= read -r token <&3 || exit 0',
  'exec 3<&-',
  `if [ "$token" = ${GATE_NO_TOKEN} ]; then unset LOCKCTL_TOKEN; else LOCKCTL_TOKEN=$token; export LOCKCTL_TOKEN; fi`,
  // Not found by PATH search, but there, not executable: 126, as execvp's EACCES (spawn's, flock's).
  'command -v -- "$1" >/dev/null 2>&1 || { case $1 in */*) false;; *) (IFS=:; for d in ${PATH-}; do [ -e "${d:-.}/$1" ] && exit 0; done; exit 1);; esac && { echo not-executable >&4; exit 126; }; echo not-found >&4; exit 127; }',
  'exec 4>&-',
  'exec "$@"',
].join('\n');
