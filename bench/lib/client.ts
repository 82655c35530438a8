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
