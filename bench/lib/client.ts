// A small HTTP client for the API, modelled on test/helpers.ts, timing nothing itself.

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export class ApiClient {
  constructor(
    readonly baseUrl: string,
    readonly key: string,
  ) {}

  async request<T = any>(method: string, route: string, init: { json?: unknown; body?: BodyInit } = {}): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { 'x-api-key': this.key };
    let body = init.body;
    if (init.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.json);
    }
    const response = await fetch(this.baseUrl + route, { method, headers, body });
    const type = response.headers.get('content-type') ?? '';
    const parsed = type.includes('application/json') ? await response.json() : Buffer.from(await response.arrayBuffer());
    return { status: response.status, headers: response.headers, body: parsed as T };
  }

  /** `file` as a Blob so a bench can make it once and upload it many times without copying. */
  async upload(file: Blob, filename: string): Promise<string> {
    const form = new FormData();
    form.append('file', file, filename);
    const response = await this.request('POST', '/api/upload', { body: form });
    if (response.status !== 201) throw new ApiError('upload', response);
    return response.body.data.fileId;
  }

  /**
   * The same upload from a multipart body made once (prepareMultipart): one buffer handed to
   * the socket, so the bench's own CPU per upload stays small next to the service's.
   */
  async uploadPrepared(upload: PreparedUpload): Promise<string> {
    const response = await fetch(`${this.baseUrl}/api/upload`, {
      method: 'POST',
      headers: { 'x-api-key': this.key, 'content-type': upload.contentType },
      body: upload.body,
    });
    const body = (await response.json()) as any;
    if (response.status !== 201) throw new ApiError('upload', { status: response.status, headers: response.headers, body });
    return body.data.fileId;
  }

  async submit(kind: string, options: Record<string, unknown>): Promise<string> {
    const response = await this.request('POST', `/api/process/${kind}`, { json: options });
    if (response.status !== 202) throw new ApiError(`POST /api/process/${kind}`, response);
    return response.body.data.taskId;
  }

  /** Long-polls until the task is completed, failed or canceled. */
  async waitForTask(taskId: string, waitSeconds = 30, timeoutMs = 180_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const response = await this.request('GET', `/api/tasks/${taskId}?wait=${waitSeconds}`);
      if (response.status !== 200) throw new ApiError('task read', response);
      if (['completed', 'failed', 'canceled'].includes(response.body.data.status)) return response.body.data;
    }
    throw new Error(`task ${taskId} did not finish in ${timeoutMs} ms`);
  }

  async download(fileId: string): Promise<Buffer> {
    const response = await this.request('GET', `/api/download/${fileId}`);
    if (response.status !== 200) throw new ApiError('download', response);
    return response.body as Buffer;
  }
}

export interface PreparedUpload {
  body: Uint8Array<ArrayBuffer>;
  contentType: string;
}

/** A multipart/form-data body with one part named "file", built once to be sent many times. */
export function prepareMultipart(bytes: Buffer, filename: string, mimeType: string): PreparedUpload {
  const boundary = `----imgapi-bench-${Date.now().toString(16)}`;
  const head = `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="${filename}"\r\ncontent-type: ${mimeType}\r\n\r\n`;
  const joined = Buffer.concat([Buffer.from(head), bytes, Buffer.from(`\r\n--${boundary}--\r\n`)]);
  const body = new Uint8Array(new ArrayBuffer(joined.length));
  body.set(joined);
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}

export class ApiError extends Error {
  constructor(
    readonly what: string,
    readonly response: ApiResponse,
  ) {
    const body = Buffer.isBuffer(response.body) ? `<${response.body.length} bytes>` : JSON.stringify(response.body);
    super(`${what} answered ${response.status}: ${body.slice(0, 300)}`);
  }

  /** Fastify's not-found handler answered: the route does not exist on this build. */
  get routeMissing(): boolean {
    return this.response.status === 404 && /^No route /.test(this.response.body?.error?.message ?? '');
  }
}
