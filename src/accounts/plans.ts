// The plan table of the contract, with the operator's PLANS_FILE merged over the defaults.
// A change to the file takes effect at the next start.
import fs from 'node:fs';
import { ConfigError } from '../config.js';

export const PLAN_NAMES = ['free', 'pro', 'max'] as const;
export type PlanName = (typeof PLAN_NAMES)[number];

export interface PlanLimits {
  apiAccess: boolean;
  monthlyTasks: number;
  dailyBatchFiles: number;
  batchSize: number;
  storageBytes: number;
  retentionSeconds: number;
  priority: number;
  maxFileBytes: number;
  maxPixels: number;
  maxFrames: number;
  maxTotalPixels: number;
  maxAiUpscalePixels: number;
  requestsPerSecond: number;
  maxQueuedTasks: number;
  monthlyRenders: number;
  origins: number;
}

/** What each limit means: the OpenAPI description of `limits` in GET /api/account. */
export const PLAN_LIMIT_DESCRIPTIONS: Record<keyof PlanLimits, string> = {
  apiAccess: 'API keys work (Free reaches the API only through the dashboard); else 403 PLAN_NO_API_ACCESS.',
  monthlyTasks: 'Tasks queued per calendar month (UTC); then 429 MONTHLY_QUOTA_EXCEEDED.',
  dailyBatchFiles: 'Files in batch requests per day (UTC); then 429 DAILY_BATCH_QUOTA_EXCEEDED.',
  batchSize: 'Length of `fileIds` in one batch; longer is 400 BATCH_TOO_LARGE.',
  storageBytes: 'Bytes of live files, uploads and outputs; then 403 STORAGE_LIMIT_EXCEEDED.',
  retentionSeconds: 'Life of a file, fixed when it is created; then 410 FILE_EXPIRED.',
  priority: "Scheduling rank of the account's tasks (higher runs first).",
  maxFileBytes: 'Bytes of one file; larger is 413 FILE_TOO_LARGE.',
  maxPixels: 'Pixels of one frame, input or output (checked from the header before decoding); else the task fails IMAGE_TOO_LARGE.',
  maxFrames: 'Frames of an animation; more and the task fails IMAGE_TOO_LARGE.',
  maxTotalPixels: 'Pixels of all frames of one input or output together (frames × canvas); more and the task fails IMAGE_TOO_LARGE.',
  maxAiUpscalePixels:
    'Input pixels of an AI upscale (`upscale` with `model: "esrgan"`; 0: not on this plan); more is 400 VALIDATION_ERROR naming `model`.',
  requestsPerSecond:
    "Requests per second per API key, or per dashboard session for requests that change something (a session's reads have their own budget of at least 50/s); then 429 RATE_LIMITED with Retry-After.",
  maxQueuedTasks: 'Tasks queued or processing at once; then 429 TOO_MANY_QUEUED_TASKS.',
  monthlyRenders: 'Delivery-URL renders (cache misses; hits are free) per calendar month (UTC); then 429 RENDER_QUOTA_EXCEEDED.',
  origins: 'Registered origins (delivery-URL sources); then 403 ORIGIN_LIMIT_EXCEEDED.',
};

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

export const DEFAULT_PLANS: Record<PlanName, PlanLimits> = {
  free: {
    apiAccess: false,
    monthlyTasks: 100,
    dailyBatchFiles: 0,
    batchSize: 0,
    storageBytes: 1 * GiB,
    retentionSeconds: 3600,
    priority: 0,
    maxFileBytes: 20 * MiB,
    maxPixels: 50_000_000,
    maxFrames: 100,
    maxTotalPixels: 100_000_000,
    maxAiUpscalePixels: 0,
    requestsPerSecond: 5,
    maxQueuedTasks: 20,
    monthlyRenders: 0,
    origins: 0,
  },
  pro: {
    apiAccess: true,
    monthlyTasks: 10_000,
    dailyBatchFiles: 1000,
    batchSize: 50,
    storageBytes: 10 * GiB,
    retentionSeconds: 86_400,
    priority: 10,
    maxFileBytes: 100 * MiB,
    maxPixels: 100_000_000,
    maxFrames: 500,
    maxTotalPixels: 400_000_000,
    maxAiUpscalePixels: 2_000_000,
    requestsPerSecond: 20,
    maxQueuedTasks: 2000,
    monthlyRenders: 100_000,
    origins: 5,
  },
  max: {
    apiAccess: true,
    monthlyTasks: 100_000,
    dailyBatchFiles: 10_000,
    batchSize: 200,
    storageBytes: 100 * GiB,
    retentionSeconds: 604_800,
    priority: 20,
    maxFileBytes: 500 * MiB,
    maxPixels: 268_402_689,
    maxFrames: 1000,
    maxTotalPixels: 1_000_000_000,
    maxAiUpscalePixels: 8_000_000,
    requestsPerSecond: 100,
    maxQueuedTasks: 10_000,
    monthlyRenders: 1_000_000,
    origins: 50,
  },
};

export type PlanTable = Record<PlanName, PlanLimits>;

export const isPlanName = (value: string): value is PlanName => (PLAN_NAMES as readonly string[]).includes(value);

/** The limits of an account's plan; a plan name the table no longer has gets Free's. */
export const limitsOf = (plans: PlanTable, plan: string | undefined): PlanLimits => plans[plan !== undefined && isPlanName(plan) ? plan : 'free'];

export function loadPlans(plansFile: string | undefined): PlanTable {
  const table: PlanTable = structuredClone(DEFAULT_PLANS);
  if (!plansFile) return table;
  let overrides: unknown;
  try {
    overrides = JSON.parse(fs.readFileSync(plansFile, 'utf8'));
  } catch (err) {
    throw new ConfigError([`PLANS_FILE "${plansFile}" is not readable JSON (${(err as Error).message})`]);
  }
  const problems: string[] = [];
  if (typeof overrides !== 'object' || overrides === null || Array.isArray(overrides)) {
    throw new ConfigError([`PLANS_FILE "${plansFile}" must hold a JSON object keyed by plan name`]);
  }
  for (const [plan, limits] of Object.entries(overrides)) {
    if (!isPlanName(plan)) {
      problems.push(`PLANS_FILE: unknown plan "${plan}" (plans are ${PLAN_NAMES.join(', ')})`);
      continue;
    }
    if (typeof limits !== 'object' || limits === null) {
      problems.push(`PLANS_FILE: "${plan}" must be an object of limits`);
      continue;
    }
    for (const [key, value] of Object.entries(limits as Record<string, unknown>)) {
      if (!(key in table[plan])) {
        problems.push(`PLANS_FILE: unknown limit "${plan}.${key}"`);
      } else if (key === 'apiAccess' ? typeof value !== 'boolean' : !(typeof value === 'number' && Number.isFinite(value) && value >= 0)) {
        problems.push(`PLANS_FILE: "${plan}.${key}" must be ${key === 'apiAccess' ? 'true or false' : 'a number ≥ 0'}`);
      } else {
        (table[plan] as unknown as Record<string, unknown>)[key] = value;
      }
    }
  }
  if (problems.length) throw new ConfigError(problems);
  return table;
}
