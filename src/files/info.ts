// A file's info (GET /api/files/{fileId}/info): computed once, on first ask, and kept in the
// file_info table until the file goes (removeFile in files.ts forgets it with the file).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Kysely, Selectable } from 'kysely';
import type { PlanLimits } from '../accounts/plans.js';
import type { DB, FilesTable } from '../db/schema.js';
import { AppError, TaskError } from '../errors.js';
import { IMAGE_FORMATS } from '../imaging/formats.js';
import { detectFacesInFile, type FaceBox } from '../imaging/faces.js';
import { imageInfo, type ImageInfo } from '../imaging/info.js';
import type { Previews } from '../imaging/preview.js';
import { inspect } from '../imaging/source.js';
import { ownedTempPrefix } from '../temp-files.js';

/** A files row (files.ts imports this module, so not its FileRecord). */
type FileRecord = Selectable<FilesTable>;

/** The side of the preview rendition the pixel facts are read from (the dashboard's thumbnail: often made already). */
const INFO_COPY_SIDE = 320;

export class FileInfos {
  /** Infos being computed, so parallel requests for one file share one computation. */
  private readonly pending = new Map<string, Promise<ImageInfo>>();

  constructor(
    private readonly db: Kysely<DB>,
    private readonly previews: Previews,
  ) {}

  /** Face detections being computed, shared by parallel requests for one file as infos are. */
  private readonly pendingFaces = new Map<string, Promise<FaceBox[]>>();

  /**
   * The info of a live file, with the faces in it (`?faces=1`): found once by the face detector
   * (faces.ts, on its own thread, within the plan's limits) and kept in the same row.
   */
  async infoWithFaces(file: FileRecord, limits: PlanLimits, now: number): Promise<ImageInfo & { faces: FaceBox[] }> {
    const info = await this.info(file, limits, now);
    if (info.faces) return { ...info, faces: info.faces };
    let finding = this.pendingFaces.get(file.id);
    if (!finding) {
      finding = this.findFaces(file, limits).finally(() => this.pendingFaces.delete(file.id));
      this.pendingFaces.set(file.id, finding);
    }
    const faces = await finding;
    await this.db
      .updateTable('file_info')
      .set({ info: JSON.stringify({ ...info, faces }) })
      .where('file_id', '=', file.id)
      .execute();
    return { ...info, faces };
  }

  private async findFaces(file: FileRecord, limits: PlanLimits): Promise<FaceBox[]> {
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), ownedTempPrefix('imgapi-faces-')));
    try {
      const source = await this.previews.localCopy(file, dir);
      return await detectFacesInFile(source, file.format, limits).catch((err: unknown) => Promise.reject(unavailable(err)));
    } finally {
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  }

  /** The info of a live file the caller may read: kept, or computed now and kept. AppError INFO_UNAVAILABLE for documents. */
  async info(file: FileRecord, limits: PlanLimits, now: number): Promise<ImageInfo> {
    if (!IMAGE_FORMATS.has(file.format)) throw new AppError('INFO_UNAVAILABLE', `No info for ${file.format} files: only images have one`);
    const kept = await this.db.selectFrom('file_info').select('info').where('file_id', '=', file.id).executeTakeFirst();
    if (kept) return JSON.parse(kept.info) as ImageInfo;
    let computing = this.pending.get(file.id);
    if (!computing) {
      computing = this.compute(file, limits, now).finally(() => this.pending.delete(file.id));
      this.pending.set(file.id, computing);
    }
    return computing;
  }

  private async compute(file: FileRecord, limits: PlanLimits, now: number): Promise<ImageInfo> {
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), ownedTempPrefix('imgapi-info-')));
    try {
      // The small copy first: it checks the plan's limits from the header, in a preview slot (503 when they are all busy).
      const thumbnail = await this.previews
        .preview(file, limits, { width: INFO_COPY_SIDE, height: INFO_COPY_SIDE })
        .catch((err: unknown) => Promise.reject(unavailable(err)));
      const source = await this.previews.localCopy(file, dir);
      const header = await inspect(source, file.format, limits).catch((err: unknown) => Promise.reject(unavailable(err)));
      const info = await imageInfo(source, header, thumbnail.data);
      // Two processes may compute it at once: the first row stays, and both answer the same facts.
      await this.db
        .insertInto('file_info')
        .values({ file_id: file.id, info: JSON.stringify(info), created_at: now })
        .onConflict((oc) => oc.column('file_id').doNothing())
        .execute();
      return info;
    } finally {
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  }
}

/** Removes a file's kept info (in the transaction that removes the file). */
export async function forgetInfo(db: Kysely<DB>, fileId: string): Promise<void> {
  await db.deleteFrom('file_info').where('file_id', '=', fileId).execute();
}

/** A preview's refusal (or the header's), as info's: the same reasons, its own code. */
function unavailable(err: unknown): unknown {
  if (err instanceof AppError && err.code === 'PREVIEW_UNAVAILABLE') {
    const tooLarge = err.details?.reason === 'IMAGE_TOO_LARGE';
    return new AppError(
      'INFO_UNAVAILABLE',
      tooLarge ? err.message.replace('No preview', 'No info') : 'No info: this image could not be decoded',
      err.details,
    );
  }
  if (err instanceof TaskError) {
    return err.code === 'IMAGE_TOO_LARGE'
      ? new AppError('INFO_UNAVAILABLE', `No info: ${err.message}`, { reason: 'IMAGE_TOO_LARGE' })
      : new AppError('INFO_UNAVAILABLE', 'This image cannot be read: it could not be decoded');
  }
  return err;
}
