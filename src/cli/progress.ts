// What the client commands show while they work. On a terminal: a bar per file in flight and
// one for the whole run, redrawn in place, with a line printed for each file as it ends. Not on
// a terminal: only those lines. With --json: nothing (the result is printed at the end).
// Labels, lines and cells are made printable() here: they carry the server's words.
import { printable, type Terminal } from './terminal.js';

/** `uploaded`: stored, its task not followed yet; `queued`: its task is followed and waits for a worker. */
export type Phase = 'waiting' | 'uploading' | 'uploaded' | 'queued' | 'processing' | 'downloading' | 'done' | 'failed';

/** How far along a file is, 0–1: the upload is the first half, processing most of the rest. */
function fractionOf(phase: Phase, part: number): number {
  switch (phase) {
    case 'waiting':
      return 0;
    case 'uploading':
      return 0.5 * part;
    case 'uploaded':
    case 'queued':
      return 0.5;
    case 'processing':
      return 0.5 + 0.4 * part;
    case 'downloading':
      return 0.9 + 0.1 * part;
    case 'done':
    case 'failed':
      return 1;
  }
}

export class Row {
  phase: Phase = 'waiting';
  /** Progress within the phase, 0–1. */
  part = 0;
  /** When the file went in flight (its row shows its own time from then). */
  started: number | undefined;

  readonly label: string;

  constructor(
    label: string,
    private readonly board: Board,
  ) {
    this.label = printable(label);
  }

  update(phase: Phase, part = 0): void {
    this.started ??= phase === 'waiting' ? undefined : Date.now();
    this.phase = phase;
    this.part = Math.max(0, Math.min(1, part));
    this.board.changed();
  }

  /** The file has ended: `line` is printed for good. */
  finish(phase: 'done' | 'failed', line: string): void {
    this.update(phase);
    this.board.print(line);
  }

  get fraction(): number {
    return fractionOf(this.phase, this.part);
  }
}

export type BoardMode = 'tty' | 'plain' | 'silent';

const REDRAW_MS = 80;
const ACTIVE: Phase[] = ['uploading', 'queued', 'processing', 'downloading'];

export class Board {
  private readonly rows: Row[] = [];
  /** Lines of the live area drawn last time (they are redrawn in place). */
  private drawn = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Redraws every second while bars are shown, so that each file's time moves on. */
  private ticker: NodeJS.Timeout | undefined;

  constructor(
    private readonly stream: Terminal,
    readonly mode: BoardMode,
  ) {}

  add(label: string): Row {
    const row = new Row(label, this);
    this.rows.push(row);
    return row;
  }

  /** A line that stays (above the bars on a terminal). */
  print(line: string): void {
    if (this.mode === 'silent') return;
    if (this.mode === 'plain') {
      this.stream.write(`${printable(line)}\n`);
      return;
    }
    this.redraw([printable(line)]);
  }

  changed(): void {
    if (this.mode !== 'tty') return;
    this.ticker ??= setInterval(() => this.changed(), 1000).unref();
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.redraw([]);
    }, REDRAW_MS);
  }

  /** Clears the bars; the printed lines stay. */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.ticker) clearInterval(this.ticker);
    this.timer = undefined;
    this.ticker = undefined;
    if (this.mode !== 'tty') return;
    this.stream.control(this.eraseLive());
    this.drawn = 0;
  }

  private eraseLive(): string {
    // Up to the first line of the live area, then erase everything below the cursor.
    return this.drawn > 0 ? `\r\x1b[${this.drawn}A\x1b[J` : '';
  }

  private redraw(printed: string[]): void {
    // One column short of the terminal's: a line that fills it exactly would wrap on some.
    // (A pseudo-terminal whose size was never set says 0 columns: taken as 80.)
    const width = Math.max(20, (this.stream.columns || 80) - 1);
    // A bar for each file being sent, processed or fetched, as many as the terminal has room for.
    const room = Math.max(1, (this.stream.rows || 24) - 2);
    const live = this.rows.filter((row) => ACTIVE.includes(row.phase)).slice(0, room);
    const lines = [...live.map((row) => rowLine(row, width)), ...(this.rows.length > 1 || live.length === 0 ? [this.overallLine(width)] : [])];
    // Our own escape sequences around printable text: the printed lines and the rows' labels are.
    this.stream.control(this.eraseLive() + printed.map((line) => `${line}\n`).join('') + lines.map((line) => `${line}\n`).join(''));
    this.drawn = lines.length;
  }

  private overallLine(width: number): string {
    const finished = this.rows.filter((row) => row.phase === 'done' || row.phase === 'failed').length;
    const failed = this.rows.filter((row) => row.phase === 'failed').length;
    const fraction = this.rows.length ? this.rows.reduce((sum, row) => sum + row.fraction, 0) / this.rows.length : 1;
    const label = `all ${finished}/${this.rows.length}${failed ? ` (${failed} failed)` : ''}`;
    return barLine(label, fraction, `${Math.floor(fraction * 100)}%`, width);
  }
}

/** A file in flight: its name, its bar, its phase (and how far along it is) and its own time. */
function rowLine(row: Row, width: number): string {
  const phase = row.phase === 'queued' ? 'queued' : `${row.phase} ${Math.floor(row.part * 100)}%`;
  return barLine(row.label, row.fraction, `${phase} ${formatDuration(Date.now() - (row.started ?? Date.now()))}`, width);
}

const BAR = 24;
const MIN_LABEL = 8;

/**
 * `label [####----] status` in `width` columns: the status is never cut; the bar narrows, then
 * goes, and the label is shortened in the middle, to make room.
 */
function barLine(label: string, fraction: number, status: string, width: number): string {
  const bar = Math.min(BAR, width - status.length - MIN_LABEL - 4);
  const drawn = bar >= 6 ? ` [${'#'.repeat(Math.round(fraction * bar))}${'-'.repeat(bar - Math.round(fraction * bar))}]` : '';
  const room = Math.max(1, width - drawn.length - status.length - 1);
  return `${fit(label, room).padEnd(room)}${drawn} ${status}`;
}

/** `text` shortened in the middle to `width` characters. */
function fit(text: string, width: number): string {
  if (text.length <= width) return text;
  if (width <= 1) return '…';
  const keep = width - 1;
  return `${text.slice(0, Math.ceil(keep / 2))}…${text.slice(text.length - Math.floor(keep / 2))}`;
}

/** 2481337 → "2.4 MB" (powers of 1000, as file managers show sizes). */
export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = -1;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

export function formatDuration(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

/** Columns padded to their widest cell; numbers (`align` "right") line up on the right. */
export function table(header: string[], cells: string[][], align: Array<'left' | 'right'>): string {
  const rows = cells.map((row) => row.map(printable));
  const widths = header.map((cell, i) => Math.max(cell.length, ...rows.map((row) => row[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (align[i] === 'right' ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
