// The operator's commands as a shell runs them (src/main.ts through tsx, so no build is needed):
// exit codes and messages of backup, restore (a tampered backup too) and copy-to, and a database newer than the code
// stopping `imgapi migrate` with exit 78 and a sentence saying why.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { MAIN_ENTRY, REPO_ROOT, tempDir } from '../helpers.js';
import { migrate, openDatabase } from '../../src/db/database.js';
import { s3Environment } from '../../src/ops/cli.js';

const CONFIG = ['DATA_DIR', 'DATABASE_URL', 'STORAGE', 'PLANS_FILE', 'LOG_LEVEL'];
const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !CONFIG.includes(k) && !k.startsWith('S3_')));

function imgapi(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...MAIN_ENTRY, ...args], { cwd: REPO_ROOT, env: { ...baseEnv, LOG_LEVEL: 'warn', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('imgapi backup, restore, copy-to, migrate (command line)', () => {
  const dir = tempDir('imgapi-ops-cli-');
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('backs up and restores, and says why it refuses', async () => {
    const env = { DATA_DIR: path.join(dir, 'data') };
    assert.equal((await imgapi(['users', 'create', '--email', 'a@example.com', '--plan', 'pro'], env)).code, 0);
    const made = await imgapi(['backup', path.join(dir, 'backup')], env);
    assert.equal(made.code, 0, made.stderr);
    assert.match(made.stderr, /backup complete/);

    const again = await imgapi(['backup', path.join(dir, 'backup')], env);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^imgapi backup: .*is not empty/m);
    assert.doesNotMatch(again.stderr, /^ {4}at /m, 'no stack trace');

    const restored = { DATA_DIR: path.join(dir, 'restored') };
    const first = await imgapi(['restore', path.join(dir, 'backup')], restored);
    assert.equal(first.code, 0, first.stderr);
    const second = await imgapi(['restore', path.join(dir, 'backup')], restored);
    assert.equal(second.code, 1);
    assert.match(second.stderr, /^imgapi restore: .*restore needs an empty target/m);

    // A tampered backup: one line naming the entry, exit 1, no stack trace, nothing restored.
    const tampered = path.join(dir, 'tampered');
    fs.cpSync(path.join(dir, 'backup'), tampered, { recursive: true });
    fs.rmSync(path.join(tampered, 'objects'), { recursive: true, force: true });
    fs.symlinkSync(dir, path.join(tampered, 'objects'));
    const refused = await imgapi(['restore', tampered], { DATA_DIR: path.join(dir, 'refused') });
    assert.equal(refused.code, 1);
    assert.equal(
      refused.stderr,
      'imgapi restore: backup entry "objects" is a symbolic link: a backup holds only regular files and directories, and restore follows no links\n',
    );
    assert.ok(!fs.existsSync(path.join(dir, 'refused', 'imgapi.db')));

    const pg = await imgapi(['backup', path.join(dir, 'pg')], { ...env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    assert.equal(pg.code, 1);
    assert.match(pg.stderr, /pg_dump/);

    const usage = await imgapi(['copy-to'], env);
    assert.equal(usage.code, 1);
    assert.match(usage.stderr, /usage: imgapi copy-to --database URL/);
  });

  it('a database migrated by a newer version stops the command with exit 78 and says so', async () => {
    const file = path.join(dir, 'newer', 'imgapi.db');
    const database = await openDatabase({ dialect: 'sqlite', file });
    await migrate(database);
    await sql`insert into kysely_migration (name, timestamp) values ('0099_later', '2030-01-01T00:00:00.000Z')`.execute(database.db);
    await database.close();
    const result = await imgapi(['migrate'], { DATA_DIR: path.dirname(file) });
    assert.equal(result.code, 78, result.stderr);
    assert.match(result.stderr, /the database was migrated by a newer version of imgapi \(migration 0099_later unknown to this one/);
    assert.doesNotMatch(result.stderr, /^ {4}at /m, 'no stack trace');
  });

  it('reads --storage s3://bucket?endpoint=…&region=…&path-style=… as the S3 variables', () => {
    assert.deepEqual(s3Environment('s3://imgapi-files?endpoint=http://minio:9000&region=eu-west-1&path-style=true'), {
      STORAGE: 's3',
      S3_BUCKET: 'imgapi-files',
      S3_ENDPOINT: 'http://minio:9000',
      S3_REGION: 'eu-west-1',
      S3_FORCE_PATH_STYLE: 'true',
    });
    assert.throws(() => s3Environment('https://example.com/bucket'), /--storage must be s3:\/\/BUCKET/);
  });
});
