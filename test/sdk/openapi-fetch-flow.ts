// What a developer writes with nothing but the generated types (sdk/openapi.ts, from
// openapi-typescript) and openapi-fetch: upload → convert → wait → download. No casts, no
// suppressed errors, no `any`: test/sdk/generated.test.ts type-checks this file on its own and
// runs it against a real server.
import createClient from 'openapi-fetch';
import type { paths } from '../../sdk/openapi.js';

export async function convertToWebp(baseUrl: string, apiKey: string, image: Blob, filename: string): Promise<Blob> {
  const client = createClient<paths>({ baseUrl, headers: { 'x-api-key': apiKey } });

  const uploaded = await client.POST('/api/upload', {
    body: { file: image },
    bodySerializer: (body) => {
      const form = new FormData();
      form.append('file', body.file, filename);
      return form;
    },
  });
  if (!uploaded.data) throw new Error(`upload failed: ${uploaded.error?.error.code}`);

  const queued = await client.POST('/api/process/convert', { body: { fileId: uploaded.data.data.fileId, format: 'webp', quality: 80 } });
  if (!queued.data) throw new Error(`convert failed: ${queued.error?.error.code}`);
  const { taskId } = queued.data.data;

  for (;;) {
    const polled = await client.GET('/api/tasks/{taskId}', { params: { path: { taskId }, query: { wait: 10 } } });
    if (!polled.data) throw new Error(`task read failed: ${polled.error?.error.code}`);
    const task = polled.data.data;
    if (task.status === 'failed' || task.status === 'canceled') throw new Error(`task ${task.status}: ${task.error?.code}`);
    if (task.status !== 'completed' || !task.outputFileId) continue;

    const downloaded = await client.GET('/api/download/{fileId}', { params: { path: { fileId: task.outputFileId } }, parseAs: 'blob' });
    if (!downloaded.data) throw new Error(`download failed: ${downloaded.response.status}`);
    return downloaded.data;
  }
}
