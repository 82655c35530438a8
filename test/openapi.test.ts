// The OpenAPI document (/openapi.json) as a new user's tools read it: `redocly lint` with the
// recommended-strict ruleset (redocly.yaml) finds no problem at all (it checks every example
// against its schema, an operationId on every operation, a 4xx on every operation, …), and the
// document has what clients are built from: named schemas, exact error codes per operation,
// request bodies for both uploads, real media types for downloads, a relative server.
// The responses themselves are checked against it in every HTTP suite (test/openapi-contract.ts).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { OPERATIONS } from '../src/operations/registry.js';
import { REPO_ROOT, startServer, tempDir, type TestServer } from './helpers.js';

/** Redocly's CLI, a dev dependency, run by the Node running the tests. */
const REDOCLY = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js');

type Doc = any;

describe('OpenAPI document', () => {
  let server: TestServer;
  let doc: Doc;
  const operations = () =>
    Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, item]) =>
      Object.entries(item).map(([method, op]) => ({ path: p, method, op })),
    );

  before(async () => {
    server = await startServer({ workers: 0 });
    doc = await (await fetch(`${server.url}/openapi.json`)).json();
  });
  after(async () => {
    await server?.close();
  });

  it('passes `redocly lint` with recommended-strict: 0 errors, 0 warnings', () => {
    const dir = tempDir();
    try {
      const file = path.join(dir, 'openapi.json');
      fs.writeFileSync(file, JSON.stringify(doc));
      const run = spawnSync(
        process.execPath,
        [REDOCLY, 'lint', file, '--config', path.join(REPO_ROOT, 'redocly.yaml'), '--format=json', '--max-problems=1000'],
        {
          encoding: 'utf8',
          // Offline: no telemetry, no update check.
          env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', CI: 'true' },
          timeout: 120_000,
        },
      );
      const report = JSON.parse(run.stdout) as {
        totals: { errors: number; warnings: number };
        problems: { ruleId: string; message: string; location: { pointer: string }[] }[];
      };
      const problems = report.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`);
      assert.deepEqual(problems, [], `redocly found problems:\n${problems.slice(0, 50).join('\n')}`);
      assert.deepEqual(report.totals, { ...report.totals, errors: 0, warnings: 0 });
      assert.equal(run.status, 0, run.stderr);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('has a relative server, so /docs works on whatever host it is opened, and links to the dashboard', async () => {
    assert.deepEqual(
      doc.servers.map((s: { url: string }) => s.url),
      ['/'],
    );
    assert.match(doc.info.description, /\]\(\/\)/, 'a link back to the dashboard at /');
    const docs = await fetch(`${server.url}/docs/`);
    assert.equal(docs.status, 200);
  });

  it('names an operationId on every operation, each once', () => {
    const ids = operations().map(({ op }) => op.operationId);
    assert.ok(
      ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id)),
      ids.join(', '),
    );
    assert.equal(new Set(ids).size, ids.length);
    for (const expected of [
      'uploadFile',
      'downloadFile',
      'downloadFileHead',
      'presignUpload',
      'putUpload',
      'confirmUpload',
      'getTask',
      'listTasks',
      'cancelTask',
      'getBatch',
      'getAccount',
      'getUsage',
    ]) {
      assert.ok(ids.includes(expected), expected);
    }
  });

  it('has the named schemas clients are built from, with every always-present field required', () => {
    const schemas = doc.components.schemas;
    for (const name of ['FileMetadata', 'Task', 'Batch', 'ErrorResponse', 'Account', 'Usage', 'QueuedTask', 'QueuedBatch', 'PresignedUpload'])
      assert.ok(schemas[name], name);
    assert.deepEqual(schemas.FileMetadata.required, ['fileId', 'filename', 'mimeType', 'format', 'size', 'origin', 'createdAt', 'expiresAt']);
    assert.deepEqual(schemas.Task.required, ['taskId', 'type', 'status', 'progress', 'input', 'options', 'attempts', 'createdAt']);
    assert.deepEqual(schemas.ErrorResponse.properties.error.required, ['code', 'message', 'requestId']);
    // A generated client declares a type per schema: none may shadow a built-in (File, Error, Blob, Response…).
    assert.deepEqual(
      Object.keys(schemas).filter((name) => name in globalThis),
      [],
    );
    // One options schema per kind, and the bodies built from it.
    for (const op of OPERATIONS) {
      const name = op.kind.replace(/(^|-)([a-z])/g, (_m, _d, c: string) => c.toUpperCase());
      assert.ok(schemas[`${name}Options`], `${name}Options`);
      const single = doc.paths[`/api/process/${op.kind}`].post;
      assert.equal(single.operationId, `process${name}`);
      assert.equal(single.requestBody.content['application/json'].schema.$ref, `#/components/schemas/${name}Request`);
      assert.deepEqual(schemas[`${name}Request`].allOf, [{ $ref: `#/components/schemas/${name}Options` }]);
      if (op.batch)
        assert.equal(
          doc.paths[`/api/process/batch/${op.kind}`].post.requestBody.content['application/json'].schema.$ref,
          `#/components/schemas/${name}BatchRequest`,
        );
    }
    // A status of 202 may say the task failed at once.
    assert.deepEqual(schemas.QueuedTask.properties.status.enum, ['queued', 'failed']);
    // A pipeline's steps: a oneOf of each transform's <Kind>Step, told apart by `kind`.
    // The transforms are the registry's kinds with a step, in its order.
    const transforms = OPERATIONS.filter((op) => op.step).map((op) => op.kind);
    assert.ok(transforms.length > 0);
    const items = schemas.PipelineOptions.properties.steps.items;
    const stepRef = (kind: string) => `#/components/schemas/${kind.replace(/(^|-)([a-z])/g, (_m, _d, c: string) => c.toUpperCase())}Step`;
    assert.deepEqual(
      items.oneOf,
      transforms.map((kind) => ({ $ref: stepRef(kind) })),
    );
    assert.deepEqual(items.discriminator, { propertyName: 'kind', mapping: Object.fromEntries(transforms.map((kind) => [kind, stepRef(kind)])) });
    assert.deepEqual([schemas.PipelineOptions.properties.steps.minItems, schemas.PipelineOptions.properties.steps.maxItems], [1, 10]);
    // A step takes its kind's options but the output's, which come once, after the steps.
    assert.deepEqual(Object.keys(schemas.ResizeStep.properties), [
      'kind',
      ...Object.keys(schemas.ResizeOptions.properties).filter((k) => k !== 'format' && k !== 'quality'),
    ]);
    assert.deepEqual(schemas.RotateStep.required, ['kind', 'angle']);
    // Each kind's result fields are in TaskResult (named with the kind) and in its route's description.
    for (const op of OPERATIONS) {
      for (const field of Object.keys(op.result?.properties ?? {})) {
        assert.ok(schemas.TaskResult.properties[field], `TaskResult.${field} (${op.kind})`);
        assert.match(schemas.TaskResult.properties[field].description, new RegExp(`\\b${op.kind}\\b`), `TaskResult.${field} names ${op.kind}`);
        assert.ok(doc.paths[`/api/process/${op.kind}`].post.description.includes(`\`${field}\``), `${op.kind}'s description says ${field}`);
      }
    }
    assert.equal(schemas.TaskResult.additionalProperties, false, 'every result field is declared by its kind');
  });

  it('lists per operation exactly its error codes, and no dashboard code anywhere', () => {
    const codesOf = (op: any, status: string): string[] =>
      op.responses[status]?.content['application/json'].schema.allOf[1].properties.error.properties.code.enum ?? [];
    const getFile = doc.paths['/api/files/{fileId}'].get;
    assert.deepEqual(codesOf(getFile, '404'), ['NOT_FOUND']);
    assert.deepEqual(codesOf(getFile, '410'), ['FILE_EXPIRED']);
    assert.deepEqual(codesOf(getFile, '401'), ['API_KEY_MISSING', 'API_KEY_INVALID']);
    assert.deepEqual(codesOf(getFile, '403'), ['PLAN_NO_API_ACCESS', 'ACCOUNT_DISABLED'], 'a GET needs no CSRF proof');
    assert.deepEqual(codesOf(getFile, '429'), ['RATE_LIMITED']);
    assert.equal(getFile.responses['413'], undefined);
    const upload = doc.paths['/api/upload'].post;
    assert.deepEqual(Object.keys(upload.responses).sort(), ['201', '400', '401', '403', '408', '409', '413', '415', '429', '4XX', '500', '507']);
    assert.deepEqual(codesOf(upload, '413').sort(), ['FILE_TOO_LARGE', 'PAYLOAD_TOO_LARGE']);
    assert.deepEqual(codesOf(upload, '403').sort(), ['ACCOUNT_DISABLED', 'CSRF_TOKEN_INVALID', 'PLAN_NO_API_ACCESS', 'STORAGE_LIMIT_EXCEEDED']);
    const batch = doc.paths['/api/process/batch/resize'].post;
    assert.deepEqual(codesOf(batch, '429').sort(), ['DAILY_BATCH_QUOTA_EXCEEDED', 'MONTHLY_QUOTA_EXCEEDED', 'RATE_LIMITED', 'TOO_MANY_QUEUED_TASKS']);
    assert.deepEqual(codesOf(doc.paths['/api/process/resize'].post, '429').sort(), [
      'MONTHLY_QUOTA_EXCEEDED',
      'RATE_LIMITED',
      'TOO_MANY_QUEUED_TASKS',
    ]);
    // Any POST, PUT or PATCH may be sent a body, which is read before anything else (one that
    // takes none included): each lists the body's refusals.
    for (const [path, item] of Object.entries(doc.paths).filter(([p]) => p.startsWith('/api/'))) {
      for (const method of ['post', 'put', 'patch']) {
        const op = (item as any)[method];
        if (!op) continue;
        assert.ok(codesOf(op, '400').includes('VALIDATION_ERROR'), `${method} ${path}: 400 VALIDATION_ERROR`);
        assert.ok(codesOf(op, '413').includes('PAYLOAD_TOO_LARGE'), `${method} ${path}: 413 PAYLOAD_TOO_LARGE`);
        if (!op.requestBody?.content?.['multipart/form-data'])
          assert.ok(codesOf(op, '415').includes('UNSUPPORTED_MEDIA_TYPE'), `${method} ${path}: 415 UNSUPPORTED_MEDIA_TYPE`);
      }
    }
    const text = JSON.stringify(doc.paths);
    for (const code of [
      'NOT_AUTHENTICATED',
      'INVALID_CREDENTIALS',
      'EMAIL_TAKEN',
      'SIGNUP_CLOSED',
      'INVITE_INVALID',
      'SETUP_TOKEN_INVALID',
      'RESET_LINK_INVALID',
      'SETUP_COMPLETED',
      'FORBIDDEN',
    ]) {
      assert.ok(!text.includes(`"${code}"`), `${code} is a dashboard code`);
    }
  });

  it('documents every response header: request id, rate limits, Retry-After, Location, ETag, Content-Disposition, Content-Range', () => {
    const headersOf = (response: any) => Object.keys(response.headers ?? {});
    const job = doc.paths['/api/process/compress'].post.responses;
    assert.deepEqual(headersOf(job['202']), ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Location']);
    assert.ok(headersOf(job['429']).includes('Retry-After'));
    assert.deepEqual(headersOf(job['401']), ['X-Request-Id'], 'no rate-limit headers before the key is known');
    const download = doc.paths['/api/download/{fileId}'].get.responses;
    for (const name of ['ETag', 'Content-Disposition', 'Content-Length', 'Accept-Ranges']) assert.ok(headersOf(download['200']).includes(name), name);
    assert.ok(headersOf(download['206']).includes('Content-Range'));
    assert.ok(headersOf(download['416']).includes('Content-Range'));
    assert.ok(
      !headersOf(download['404']).includes('ETag') && !headersOf(download['404']).includes('Content-Disposition'),
      'errors carry no resource headers',
    );
    assert.ok(headersOf(doc.paths['/api/preview/{fileId}'].get.responses['503']).includes('Retry-After'));
    assert.equal(doc.components.headers['X-Request-Id'].required, true);
  });

  it("describes both uploads' bodies, downloads' real media types and their Range / If-None-Match / If-Range", () => {
    const upload = doc.paths['/api/upload'].post.requestBody;
    assert.equal(upload.content['multipart/form-data'].schema.$ref, '#/components/schemas/FileUpload');
    assert.deepEqual(doc.components.schemas.FileUpload.properties.file.format, 'binary');
    const put = doc.paths['/uploads/{uploadId}'].put;
    assert.deepEqual(put.requestBody.content['application/octet-stream'].schema, { type: 'string', format: 'binary' });
    assert.deepEqual(
      put.parameters.filter((p: any) => p.in === 'query').map((p: any) => [p.name, p.required]),
      [
        ['expires', true],
        ['size', true],
        ['signature', true],
      ],
    );
    assert.deepEqual(put.security, []);
    const download = doc.paths['/api/download/{fileId}'];
    const types = Object.keys(download.get.responses['200'].content);
    for (const type of ['image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/svg+xml', 'application/pdf', 'application/zip'])
      assert.ok(types.includes(type), type);
    assert.ok(!types.includes('application/json') && !types.includes('application/octet-stream'));
    assert.deepEqual(
      Object.keys(download.get.responses).filter((s) => s < '400'),
      ['200', '206', '304'],
    );
    assert.deepEqual(
      download.get.parameters.filter((p: any) => p.in === 'header').map((p: any) => p.name),
      ['range', 'if-none-match', 'if-range'],
    );
    assert.equal(download.head.operationId, 'downloadFileHead');
    assert.equal(download.head.responses['200'].content, undefined, 'HEAD answers no body');
    assert.deepEqual(Object.keys(doc.paths['/api/preview/{fileId}'].get.responses['200'].content), ['image/png', 'image/jpeg']);
  });
});
