/** A file we read has a line we cannot accept; the message names the file and the line. */
export class FileFormatError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly reason: string,
  ) {
    super(`${file}:${line}: ${reason}`);
    this.name = 'FileFormatError';
  }
}

/** Lines of a text file with their 1-based numbers, '#' comments and surrounding blanks removed. */
export function* meaningfulLines(text: string): IterableIterator<{ line: number; text: string }> {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const hash = lines[i]!.indexOf('#');
    const content = (hash === -1 ? lines[i]! : lines[i]!.slice(0, hash)).trim();
    if (content !== '') yield { line: i + 1, text: content };
  }
}
