// `upscale` with `model: "esrgan"`: the super-resolution network (src/imaging/super-resolution/)
// as the upscale step, and the rules it adds — the plan's maxAiUpscalePixels (0: not on the plan)
// checked when the task is queued and again when it runs, no animations, and its own time limit.
import type { Config } from '../config.js';
import { TaskError } from '../errors.js';
import type { FileRecord } from '../files/files.js';
import type { PlanLimits } from '../accounts/plans.js';
import { isAnimation } from '../imaging/formats.js';
import type { Size } from '../imaging/geometry.js';
import { outputFrames } from '../imaging/limits.js';
import type { Transform } from '../imaging/pipeline.js';
import { superResolve, type SuperResolved } from '../imaging/super-resolution/engine.js';
import type { FieldError, StepEnv } from './types.js';

export const UPSCALE_MODELS = ['lanczos', 'esrgan'] as const;

interface ModelOptions {
  model?: (typeof UPSCALE_MODELS)[number];
  format?: string;
}

export const isAiUpscale = (options: ModelOptions): boolean => options.model === 'esrgan';

/** Why the plan refuses an AI upscale of `pixels` input pixels, or undefined. */
function refusal(pixels: number | undefined, limits: PlanLimits): string | undefined {
  if (limits.maxAiUpscalePixels <= 0) return 'esrgan upscaling is not available on this plan (maxAiUpscalePixels is 0)';
  if (pixels !== undefined && pixels > limits.maxAiUpscalePixels) {
    return `esrgan upscales inputs of at most ${limits.maxAiUpscalePixels} pixels on this plan; this one has ${pixels}`;
  }
  return undefined;
}

/** The queue-time rules: the plan's limit on the input's pixels (where the header told them), no animation. */
export function checkAiUpscale(options: ModelOptions, inputs: FileRecord[], limits: PlanLimits): FieldError[] {
  if (!isAiUpscale(options)) return [];
  const errors: FieldError[] = [];
  const planned = refusal(undefined, limits);
  if (planned) return [{ field: 'model', message: planned }];
  for (const file of inputs) {
    const pixels = file.width !== null && file.height !== null ? file.width * file.height : undefined;
    const refused = refusal(pixels, limits);
    if (refused) errors.push({ field: 'model', message: refused });
    const frames = file.pages !== null && isAnimation(file.format) ? file.pages : 1;
    if (outputFrames(frames, options.format ?? file.format) > 1) {
      errors.push({ field: 'model', message: 'esrgan does not upscale animations; use lanczos, or ask for a still format' });
    }
  }
  return errors;
}

/** An AI upscale's own time limit (AI_TASK_TIMEOUT_SECONDS), else the usual one. */
export const aiTimeLimitMs = (config: Config, options: ModelOptions): number =>
  isAiUpscale(options) ? config.aiTaskTimeoutMs : config.taskTimeoutMs;

/**
 * The esrgan upscale step to `sizeOf(source)`. The network runs once per job, however often the
 * pipeline builds its output again (a target-size search re-encodes): later calls reopen it.
 */
export function aiUpscaleTransform(env: StepEnv, sizeOf: (source: Size) => Size): Transform {
  let done: Promise<SuperResolved> | undefined;
  return async (image, source, firstFrame) => {
    // `firstFrame` is given when the step gets a whole animation, every frame kept.
    if (firstFrame) throw new TaskError('INVALID_OPTIONS', 'model: esrgan does not upscale animations', false, { field: 'model' });
    const refused = refusal(source.width * source.height, env.limits);
    if (refused) throw new TaskError('IMAGE_TOO_LARGE', refused, false, { field: 'model' });
    done ??= env.task.scratchDir().then((tmpDir) =>
      superResolve(image, sizeOf(source), {
        tmpDir,
        signal: env.task.signal,
        // The tiles are most of the work; the encode after them is the rest.
        progress: (tiles, total) => env.task.progress(Math.floor((tiles / total) * 95)),
      }),
    );
    return (await done).open();
  };
}
