import { readFile } from 'node:fs/promises';
import { InvalidArgumentError } from 'commander';

/** Where `--etcd-user` finds its password when no `--etcd-password-file` is given. */
export const ETCD_PASSWORD_VARIABLE = 'LOCKSERVER_ETCD_PASSWORD';

/** `--etcd-user`: a user name, or the deprecated `user:password`, whose password `ps` shows to everyone. */
export interface EtcdUserOption {
  readonly username: string;
  /** Only from the deprecated `user:password` form. */
  readonly password?: string;
}

export interface EtcdCredentials {
  readonly username: string;
  readonly password: string;
}

/** Where the password comes from, once the command line is known to be consistent. */
export type EtcdPasswordSource =
  | { readonly from: 'command-line'; readonly password: string }
  | { readonly from: 'environment'; readonly password: string }
  | { readonly from: 'file'; readonly file: string };

/** A command line that cannot work as given (exit 2, like any other bad option). */
export class EtcdAuthUsageError extends Error {
  override name = 'EtcdAuthUsageError';
}

export function parseEtcdUser(value: string): EtcdUserOption {
  const cut = value.indexOf(':');
  if (cut === -1) {
    if (value === '') throw new InvalidArgumentError('an empty user name.');
    return { username: value };
  }
  if (cut === 0) throw new InvalidArgumentError('an empty user name.');
  return { username: value.slice(0, cut), password: value.slice(cut + 1) };
}

/**
 * Which password goes with `--etcd-user`: from `--etcd-password-file`, else from
 * LOCKSERVER_ETCD_PASSWORD, else (deprecated) from `user:password`. Exactly one source may give
 * it, so that nobody has to guess which one won; undefined without `--etcd-user`.
 */
export function etcdPasswordSource(
  user: EtcdUserOption | undefined,
  passwordFile: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): EtcdPasswordSource | undefined {
  // Set but empty counts as unset: an environment file may carry the line with no value.
  const fromEnvironment = env[ETCD_PASSWORD_VARIABLE] === '' ? undefined : env[ETCD_PASSWORD_VARIABLE];
  if (user === undefined) {
    if (passwordFile !== undefined) throw new EtcdAuthUsageError('--etcd-password-file needs --etcd-user');
    // The variable alone is ignored: it may be set for every service of the machine.
    return undefined;
  }
  const given = [
    user.password === undefined ? undefined : '--etcd-user user:password',
    passwordFile === undefined ? undefined : '--etcd-password-file',
    fromEnvironment === undefined ? undefined : ETCD_PASSWORD_VARIABLE,
  ].filter((source) => source !== undefined);
  if (given.length > 1) throw new EtcdAuthUsageError(`the etcd password is given ${given.length} ways (${given.join(', ')}); give it one way`);
  if (passwordFile !== undefined) return { from: 'file', file: passwordFile };
  if (fromEnvironment !== undefined) return { from: 'environment', password: fromEnvironment };
  if (user.password !== undefined) return { from: 'command-line', password: user.password };
  throw new EtcdAuthUsageError(`--etcd-user ${user.username} needs a password: set ${ETCD_PASSWORD_VARIABLE} or give --etcd-password-file`);
}

/**
 * The password a file holds: its content without one final line break (`echo secret > file`
 * writes one). Any problem names the file; an empty password is refused rather than sent.
 */
export async function readEtcdPassword(file: string, read: (file: string) => Promise<Buffer> = readFile): Promise<string> {
  let content: Buffer;
  try {
    content = await read(file);
  } catch (error) {
    throw new Error(`cannot read --etcd-password-file ${file}: ${(error as Error).message}`);
  }
  const password = content.toString('utf8').replace(/\r?\n$/, '');
  if (password === '') throw new Error(`--etcd-password-file ${file} is empty`);
  return password;
}

/** The credentials for etcd from a source etcdPasswordSource() chose. */
export async function etcdCredentials(user: EtcdUserOption, source: EtcdPasswordSource): Promise<EtcdCredentials> {
  const password = source.from === 'file' ? await readEtcdPassword(source.file) : source.password;
  return { username: user.username, password };
}
