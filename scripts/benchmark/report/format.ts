/** Cell formatting shared by every section of the report. */

export function num(value: number | undefined, digits = 0): string {
  if (value === undefined || !Number.isFinite(value)) return '–';
  return value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function mb(bytes: number | undefined): string {
  return bytes === undefined ? '–' : num(bytes / 2 ** 20);
}

export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

export function cpu(value: number | undefined): string {
  return value === undefined ? '–' : `${num(value * 100)}%`;
}

/** One share of a core per process, in order (n1 / n2 / n3, m1 / m2 / m3). */
export function cores(values: ReadonlyArray<number | undefined> | undefined): string {
  if (values === undefined || values.length === 0) return '–';
  return values.map((v) => cpu(v)).join(' / ');
}
