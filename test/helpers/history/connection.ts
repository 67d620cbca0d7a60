import type { ExecutionContext } from 'ava';
import { BufferWriter } from '../../../src/protocol/BufferWriter.js';
import { GREETING_ACCEPTED } from '../../../src/protocol/constants.js';
import { decodeReply, replyFrameLength, type Reply } from '../../../src/protocol/decodeReply.js';
import { encodeRequest } from '../../../src/protocol/encodeRequest.js';
import type { Request } from '../../../src/protocol/messages.js';
import { bounded } from '../bounded.js';
import { RawClient } from '../rawClient.js';

/** Why a command got no reply: the connection closed (or failed), or the client's bound ran out. */
export class Unanswered extends Error {
  constructor(
    readonly why: 'closed' | 'timeout',
    detail: string,
  ) {
    super(`${why}: ${detail}`);
  }
}

function unanswered(error: unknown): Unanswered {
  const message = (error as Error).message;
  return new Unanswered(/timed out/.test(message) ? 'timeout' : 'closed', message);
}

/**
 * One raw-protocol connection of a nemesis client (a RawClient), usable without ava (the
 * nemesis script uses it too): connect and greeting within a bound, then one command at a time,
 * each reply awaited for a bounded time. A command unanswered in time closes the connection (its
 * effect stays unknown), as a 0.9b client that gives up on a server would.
 */
export class Connection {
  private constructor(private readonly client: RawClient) {}

  /** Connects and reads the greeting (0x01), both within `ms`; throws Unanswered otherwise. */
  static async open(host: string, port: number, localAddress: string | undefined, ms: number): Promise<Connection> {
    // RawClient destroys its socket at the test's teardown; here the caller closes it instead,
    // and a connect that completes after our bound is destroyed at once.
    let late = false;
    const owner = { teardown: () => undefined } as unknown as ExecutionContext;
    const connecting = RawClient.connect(owner, { host, port, localAddress });
    connecting.then(
      (c) => late && c.destroy(),
      () => undefined,
    );
    let client: RawClient | undefined;
    try {
      client = await bounded(connecting, ms, `connecting to ${host}:${port}`);
      const greeting = await client.read(1, ms);
      if (greeting[0] !== GREETING_ACCEPTED) throw new Error(`refused: greeting 0x${greeting.toString('hex')} from ${host}`);
      return new Connection(client);
    } catch (error) {
      late = true;
      client?.destroy();
      throw unanswered(error);
    }
  }

  get isClosed(): boolean {
    return this.client.isClosed || this.client.socket.destroyed;
  }

  /** Sends one request and returns its decoded reply; throws Unanswered (and closes) without one. */
  async call(request: Request, ms: number): Promise<Reply> {
    if (this.isClosed) throw new Unanswered('closed', 'connection already closed');
    const out = new BufferWriter();
    encodeRequest(out, request);
    this.client.send(out.flush());
    try {
      const frame = await this.client.readFrame((b) => replyFrameLength(request.command, b, 0, b.length), ms);
      return decodeReply(request.command, frame);
    } catch (error) {
      this.close();
      throw unanswered(error);
    }
  }

  close(): void {
    this.client.destroy();
  }
}
