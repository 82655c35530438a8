// File records: what the API says about a stored object, and who may see it.
import type { Kysely, Selectable } from 'kysely';
import { iso, type Clock } from '../clock.js';
import type { Database } from '../db/database.js';
import type { DB, FilesTable } from '../db/schema.js';
import { AppError, notFound } from '../errors.js';
import { releaseStorage } from '../accounts/quota.js';
import type { ObjectStorage } from '../storage/storage.js';
import { olderThan, pageOf } from '../http/pagination.js';

export type FileRecord = Selectable<FilesTable>;

export function fileToApi(file: FileRecord) {
  return {
    fileId: file.id,
    filename: file.filename,
    mimeType: file.mime_type,
    format: file.format,
    size: Number(file.size),
    ...(file.width !== null ? { width: file.width } : {}),
    ...(file.height !== null ? { height: file.height } : {}),
    ...(file.pages !== null ? { pages: file.pages } : {}),
    origin: file.origin,
    ...(file.task_id !== null ? { taskId: file.task_id } : {}),
    createdAt: iso(file.created_at),
    expiresAt: iso(file.expires_at),
  };
}

/** The caller's file, readable now: 404 for another account's or a deleted one, 410 when expired. */
export async function getLiveFile(db: Kysely<DB>, accountId: string, fileId: string, now: number): Promise<FileRecord> {
  const file = await db
    .selectFrom('files')
    .selectAll()
    .where('id', '=', fileId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  if (!file) throw notFound('File');
  if (file.expires_at <= now) throw new AppError('FILE_EXPIRED', 'The file has expired and its bytes were deleted', { expiredAt: iso(file.expires_at) });
  if (file.deleted_at !== null) throw notFound('File');
  return file;
}

export async function listFiles(database: Database, accountId: string, now: number, limit: number, cursor?: string) {
  const after = olderThan(cursor, 'created_at', 'id');
  const rows = await database.db
    .selectFrom('files')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null)
    .where('expires_at', '>', now)
    .$if(after !== undefined, (qb) => qb.where(after!))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit + 1)
    .execute();
  const { page, nextCursor } = pageOf(rows, limit);
  return { files: page.map(fileToApi), nextCursor };
}

/**
 * Deletes a file at once and frees its storage. A file that an unfinished task still reads is
 * refused (409 FILE_IN_USE): cancel the task first.
 */
export async function deleteFile(database: Database, storage: ObjectStorage, clock: Clock, accountId: string, fileId: string): Promise<void> {
  const file = await getLiveFile(database.db, accountId, fileId, clock.now());
  const deleted = await database.transaction(async (tx) => {
    const inUse = await tx
      .selectFrom('task_inputs')
      .innerJoin('tasks', 'tasks.id', 'task_inputs.task_id')
      .select('tasks.id')
      .where('task_inputs.file_id', '=', fileId)
      .where('tasks.status', 'in', ['queued', 'processing'])
      .executeTakeFirst();
    if (inUse) throw new AppError('FILE_IN_USE', 'An unfinished task reads this file; cancel it or wait for it to finish', { taskId: inUse.id });
    const result = await tx
      .updateTable('files')
      .set({ deleted_at: clock.now() })
      .where('id', '=', fileId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) return false;
    await releaseStorage(tx, accountId, Number(file.size));
    return true;
  });
  if (deleted) await storage.delete(file.storage_key);
}
