/** The TCP port LockServer listens on by default (the 0.9b document names none; ours is 7734). */
export const DEFAULT_PORT = 7734;
