// Storage and direct-upload settings: defaults, every problem named by its variable, and the
// upload signing key generated once in DATA_DIR (0600) when none is given.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, uploadSigningSecret } from '../../src/config.js';
import { tempDir } from '../helpers.js';

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  return [];
}

describe('storage configuration', () => {
  it('defaults to local storage under DATA_DIR and 15-minute upload URLs', () => {
    const config = loadConfig({ DATA_DIR: '/srv/imgapi' });
    assert.deepEqual(config.storage, { kind: 'local', root: '/srv/imgapi/objects' });
    assert.equal(config.uploadUrlTtlMs, 900_000);
    assert.equal(config.uploadSigningSecret, undefined);
  });

  it('reads S3 settings, with path-style addressing for a custom endpoint and the AWS region variable', () => {
    const config = loadConfig({
      STORAGE: 's3',
      S3_BUCKET: 'imgapi-files',
      S3_ENDPOINT: 'http://minio.internal:9000/',
      AWS_REGION: 'eu-west-3',
      AWS_ACCESS_KEY_ID: 'AKIA',
      AWS_SECRET_ACCESS_KEY: 'secret',
    });
    assert.deepEqual(config.storage, {
      kind: 's3',
      bucket: 'imgapi-files',
      endpoint: 'http://minio.internal:9000',
      region: 'eu-west-3',
      forcePathStyle: true,
      credentials: { accessKeyId: 'AKIA', secretAccessKey: 'secret' },
    });
    const aws = loadConfig({ STORAGE: 's3', S3_BUCKET: 'imgapi-files', S3_REGION: 'us-west-2', AWS_REGION: 'eu-west-3' });
    assert.deepEqual(aws.storage, {
      kind: 's3',
      bucket: 'imgapi-files',
      endpoint: undefined,
      region: 'us-west-2',
      forcePathStyle: false,
      credentials: undefined,
    });
    assert.equal(
      (loadConfig({ STORAGE: 's3', S3_BUCKET: 'b-1', S3_FORCE_PATH_STYLE: 'true' }).storage as { forcePathStyle: boolean }).forcePathStyle,
      true,
    );
  });

  it('names every bad variable, all at once', () => {
    assert.deepEqual(problems({ STORAGE: 'ftp' }), ['STORAGE must be local or s3, got "ftp"']);
    const all = problems({
      STORAGE: 's3',
      S3_ENDPOINT: 'minio:9000',
      S3_FORCE_PATH_STYLE: 'maybe',
      AWS_ACCESS_KEY_ID: 'AKIA',
      UPLOAD_URL_TTL_SECONDS: '5',
      UPLOAD_SIGNING_SECRET: 'short',
    });
    for (const name of [
      'S3_BUCKET',
      'S3_ENDPOINT',
      'S3_FORCE_PATH_STYLE',
      'AWS_SECRET_ACCESS_KEY',
      'UPLOAD_URL_TTL_SECONDS',
      'UPLOAD_SIGNING_SECRET',
    ]) {
      assert.ok(
        all.some((p) => p.startsWith(name)),
        `${name} in ${JSON.stringify(all)}`,
      );
    }
    assert.ok(problems({ STORAGE: 's3', S3_BUCKET: 'Not_A_Bucket' }).some((p) => p.startsWith('S3_BUCKET')));
  });

  it('generates the upload signing key once, private to its owner, unless one is given', () => {
    const dir = tempDir();
    try {
      const config = loadConfig({ DATA_DIR: dir });
      const first = uploadSigningSecret(config);
      assert.match(first, /^[0-9a-f]{64}$/);
      const file = path.join(dir, 'upload-signing.key');
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.equal(uploadSigningSecret(loadConfig({ DATA_DIR: dir })), first, 'kept across restarts');
      assert.deepEqual(fs.readdirSync(dir), ['upload-signing.key']);
      const given = 'x'.repeat(40);
      assert.equal(uploadSigningSecret(loadConfig({ DATA_DIR: dir, UPLOAD_SIGNING_SECRET: given })), given);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
