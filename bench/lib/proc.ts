// Linux /proc readers: resident memory and CPU time of a process, sampled from the outside so
// the numbers belong to the process measured and not to the bench that drives it.
import fs from 'node:fs';

/** Clock ticks per second for /proc/<pid>/stat (USER_HZ; 100 on every Linux we run on). */
const CLK_TCK = 100;
export const MiB = 1024 * 1024;

function statusField(pid: number | 'self', field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined; // gone, or not Linux
  }
}

/** Current resident set size in bytes. */
export const rssOf = (pid: number | 'self'): number | undefined => statusField(pid, 'VmRSS');
/** Peak resident set size in bytes since start or since the last resetPeakRss. */
export const peakRssOf = (pid: number | 'self'): number | undefined => statusField(pid, 'VmHWM');

/** Resets VmHWM (writes 5 to clear_refs, Linux ≥ 4.0). False when that is not allowed. */
export function resetPeakRss(pid: number | 'self'): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

function statFields(pid: number | 'self'): string[] | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** User + system CPU seconds the process has used. */
export function cpuSecondsOf(pid: number | 'self'): number | undefined {
  const f = statFields(pid);
  if (!f) return undefined;
  // After the name: state(3) … utime(14) stime(15) cutime(16) cstime(17); index = field - 3.
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}

/**
 * User + system CPU seconds of one thread of a process (`tid` = `pid`: its main thread, where
 * Node runs JavaScript). Undefined when the thread is gone.
 */
export function threadCpuSecondsOf(pid: number, tid: number): number | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/**
 * Nanoseconds one thread has run (`/proc/<pid>/task/<tid>/schedstat`): exact, where the `stat`
 * ticks above are 10 ms. Undefined when the thread is gone.
 */
export function threadCpuNsOf(pid: number, tid: number): number | undefined {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return undefined;
  }
}

/**
 * Nanoseconds the threads of a process named `name` (`comm`: "libuv-worker", say) have run, from
 * their schedstat: exact, for threads that live as long as the process (libuv's pool does).
 */
export function threadsCpuNsNamed(pid: number, name: string): number {
  let ns = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      if (fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() === name) ns += threadCpuNsOf(pid, Number(tid)) ?? 0;
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns;
}

/** CPU seconds of the children this process has waited for (exited child processes). */
export function reapedChildrenCpuSeconds(): number {
  const f = statFields('self');
  return f ? (Number(f[13]) + Number(f[14])) / CLK_TCK : 0;
}

export function loadAverage(): number[] {
  try {
    return fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
  } catch {
    return [];
  }
}

/**
 * Samples the summed VmRSS of a set of processes every `intervalMs` and keeps the peak.
 * `pids` is read at each tick, so it may change (ImageMagick children come and go).
 */
export class RssSampler {
  peakTotal = 0;
  peakSingle = 0;
  samples = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pids: () => Iterable<number | 'self'>,
    private readonly intervalMs = 50,
  ) {}

  start(): this {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    return this;
  }

  stop(): this {
    this.sample();
    clearInterval(this.timer);
    return this;
  }

  private sample(): void {
    let total = 0;
    for (const pid of this.pids()) {
      const rss = rssOf(pid) ?? 0;
      total += rss;
      this.peakSingle = Math.max(this.peakSingle, rss);
    }
    this.peakTotal = Math.max(this.peakTotal, total);
    this.samples++;
  }
}

/** CPU seconds the whole machine spent busy (all CPUs, /proc/stat), to tell how loaded it was. */
function machineBusySeconds(): number {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
    return (user! + nice! + system! + irq! + softirq! + steal!) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/**
 * Measures, over a stretch of time, how many CPUs were kept busy by processes other than the
 * ones measured (and this bench): other work on the machine, which skews wall-clock numbers.
 */
export class ForeignLoad {
  private readonly busy0 = machineBusySeconds();
  private readonly self0 = process.cpuUsage();
  private readonly started = performance.now();
  private ended?: { busy: number; self: NodeJS.CpuUsage; at: number };

  /** Ends the stretch now, though `shares` is asked later (when what the client spent is known). */
  end(): this {
    this.ended = { busy: machineBusySeconds(), self: process.cpuUsage(this.self0), at: performance.now() };
    return this;
  }

  /** `measuredCpuSeconds`: what the measured processes used meanwhile. Returns busy CPUs elsewhere. */
  stop(measuredCpuSeconds: number): number {
    return this.shares(measuredCpuSeconds).foreign;
  }

  /**
   * Where the CPUs went meanwhile, each in CPUs (CPU seconds per second of wall time): the whole
   * machine, the measured processes, this bench (with `clientCpuSeconds`: its HTTP client's
   * process), and other work (the rest).
   */
  shares(measuredCpuSeconds: number, clientCpuSeconds = 0): CpuShares {
    const self = this.ended?.self ?? process.cpuUsage(this.self0);
    const wall = ((this.ended?.at ?? performance.now()) - this.started) / 1000;
    const machine = (this.ended?.busy ?? machineBusySeconds()) - this.busy0;
    const bench = (self.user + self.system) / 1e6 + clientCpuSeconds;
    return {
      machine: machine / wall,
      measured: measuredCpuSeconds / wall,
      bench: bench / wall,
      foreign: Math.max(0, (machine - measuredCpuSeconds - bench) / wall),
    };
  }
}

export interface CpuShares {
  machine: number;
  measured: number;
  bench: number;
  foreign: number;
}

/**
 * CPU seconds of each thread of a process, summed by thread name (`comm`: "node" for the main
 * thread, "libuv-worker", "V8 Worker", a worker thread's name, libvips' threads…), plus
 * "(exited threads)": what threads that have gone used (the process's total minus the living
 * ones). Compare two calls to see where a stretch of work spent its CPU.
 */
export function cpuByThreadName(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  let living = 0;
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return byName;
  }
  for (const tid of tids) {
    try {
      const text = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = tid === String(pid) ? 'main thread' : text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
      const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
      const seconds = (Number(f[11]) + Number(f[12])) / CLK_TCK;
      byName.set(name, (byName.get(name) ?? 0) + seconds);
      living += seconds;
    } catch {
      // the thread ended meanwhile: counted below with the exited ones
    }
  }
  const total = cpuSecondsOf(pid);
  if (total !== undefined) byName.set('(exited threads)', Math.max(0, total - living));
  return byName;
}

/** `after − before` of two cpuByThreadName snapshots, names with no CPU left out. */
export function threadCpuDelta(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const delta: Record<string, number> = {};
  for (const [name, seconds] of after) {
    const d = seconds - (before.get(name) ?? 0);
    if (d > 0) delta[name] = d;
  }
  return delta;
}

/**
 * Samples how many threads of a process are runnable (state R: running, or ready and waiting
 * for a CPU) every `intervalMs`: whether it offers the machine enough work to keep every CPU
 * busy, whatever else runs there. A side whose threads wait (on its event loop, on I/O, for a
 * slot) while CPUs could run them shows as samples with fewer runnable threads than CPUs.
 */
export class RunnableSampler {
  private readonly counts: number[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pid: number,
    private readonly intervalMs = 5,
  ) {}

  start(): this {
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    return this;
  }

  /** Stops; the mean of runnable threads and the share of samples with at least `cpus` of them. */
  stop(cpus: number): { mean: number; saturating: number; samples: number } {
    clearInterval(this.timer);
    const n = this.counts.length;
    return {
      mean: n ? this.counts.reduce((a, b) => a + b, 0) / n : NaN,
      saturating: n ? this.counts.filter((c) => c >= cpus).length / n : NaN,
      samples: n,
    };
  }

  private sample(): void {
    let runnable = 0;
    let tids: string[];
    try {
      tids = fs.readdirSync(`/proc/${this.pid}/task`);
    } catch {
      return;
    }
    for (const tid of tids) {
      try {
        const text = fs.readFileSync(`/proc/${this.pid}/task/${tid}/stat`, 'utf8');
        if (text[text.lastIndexOf(')') + 2] === 'R') runnable++;
      } catch {
        // the thread ended meanwhile
      }
    }
    this.counts.push(runnable);
  }
}
