// What a scenario is and what it hands back. run.ts holds the list of scenarios, runs them in
// order, prints every scenario's report, then one table of all rows, and writes the JSON.

interface Target {
  /** `ratio` compares Row.ratio, `value` compares Row.value. */
  on: 'ratio' | 'value';
  op: '>=' | '<=';
  threshold: number;
}

/** One line of the final table. */
export interface Row {
  scenario: string;
  variant: string;
  /** What `value` measures, e.g. "throughput". */
  metric: string;
  value: number | null;
  unit: string;
  /** value / baseline value, when the row is compared with a baseline of the same run. */
  ratio?: number | null;
  /** The variant the ratio is against. */
  baseline?: string;
  target?: Target;
  /** Peak resident memory of the measured process(es), bytes. */
  peakRssBytes?: number | null;
  /** Anything else worth keeping in the JSON (CPU, spread, phases). */
  extra?: Record<string, unknown>;
  /** Short, shown in the table. */
  note?: string;
}

export interface ScenarioResult {
  rows: Row[];
  /** Free-form lines printed under the scenario's heading (breakdowns, diagnostics). */
  report: string[];
  /** Scenario-specific data for results.json. */
  details?: Record<string, unknown>;
}

export interface BenchContext {
  repoRoot: string;
  /** A private temp dir for this run, removed at the end. */
  tmpDir: string;
  /** Seconds left of the overall budget (scenarios use it to decide on extra rounds). */
  secondsLeft(): number;
  /** Progress to stderr. */
  log(message: string): void;
  /** Registers a cleanup that runs at exit, even after a failure or Ctrl-C. */
  onCleanup(fn: () => void | Promise<void>): void;
}

export interface Scenario {
  name: string;
  title: string;
  run(ctx: BenchContext): Promise<ScenarioResult>;
}

export function meetsTarget(row: Row): boolean | undefined {
  if (!row.target) return undefined;
  const measured = row.target.on === 'ratio' ? row.ratio : row.value;
  if (measured === null || measured === undefined || Number.isNaN(measured)) return undefined;
  return row.target.op === '>=' ? measured >= row.target.threshold : measured <= row.target.threshold;
}
