// Restore trusts nothing in a backup. One real backup is made per describe (a server's uploads and
// a completed task, and its upload-signing key); each case copies it, tampers with the copy, and
// restores that into a fresh target beside a decoy folder (with objects and `.tmp` files of its
// own, as a live DATA_DIR has). Every case asserts the refusal's message, the decoy untouched,
// the target exactly as before (files, and no rows in the database), and that the untampered
// backup then restores into that same target. On SQLite targets; on PostgreSQL too for the final
// check, the signing key, and the undoing of a failure met after the rows were loaded (in one
// transaction, rolled back). Into a bucket (a local backup uploaded), and from a backup whose
// objects stay in S3 (checked there).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Client, DIALECTS, freshDatabase, startServer, tempDir, type TestServer } from '../helpers.js';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';
import { holdsRows } from '../../src/db/dump.js';
import { backup, type BackupManifest } from '../../src/ops/backup.js';
import { hashObject, OpsError } from '../../src/ops/objects.js';
import { restore } from '../../src/ops/restore.js';
import { S3Storage } from '../../src/storage/s3.js';
import { startS3rver } from '../s3rver.js';

type Manifest = BackupManifest & Record<string, unknown>;
/** Tampers with the copy at `dir`; a manifest returned is written as its manifest.json. */
type Tamper = (dir: string, manifest: Manifest) => Manifest | void;

const sha256 = (data: Buffer | string) => crypto.createHash('sha256').update(data).digest('hex');

/** Every entry under `dir`: its kind, and a regular file's contents' hash. */
function tree(dir: string): Record<string, string> {
  const seen: Record<string, string> = {};
  const walk = (relative: string) => {
    for (const name of fs.readdirSync(path.join(dir, relative))) {
      const entry = path.join(relative, name);
      const stat = fs.lstatSync(path.join(dir, entry));
      if (stat.isDirectory()) {
        seen[entry] = 'dir';
        walk(entry);
      } else seen[entry] = stat.isFile() ? sha256(fs.readFileSync(path.join(dir, entry))) : 'other';
    }
  };
  if (fs.existsSync(dir)) walk('');
  return seen;
}

for (const dialect of DIALECTS) {
  describe(`restore refuses a tampered backup and writes nothing (${dialect} target, local storage)`, () => {
    const scratch = tempDir('imgapi-restore-tampered-');
    const pristine = path.join(scratch, 'pristine');
    let source: TestServer;
    let manifest: Manifest;
    let cases = 0;

    before(async () => {
      source = await startServer({ dialect: 'sqlite', workers: 1 });
      const client = new Client(source.url, await source.newKey());
      const image = (seed: number) =>
        sharp({ create: { width: 20 + seed, height: 16, channels: 3, background: { r: seed * 40, g: 90, b: 200 } } })
          .png()
          .toBuffer();
      const fileId = await client.uploadOk(await image(1), 'one.png');
      await client.uploadOk(await image(2), 'two.png');
      const task = await client.post('/api/process/convert', { fileId, format: 'webp' });
      assert.equal((await client.waitForTask(task.body.data.taskId)).status, 'completed');
      fs.writeFileSync(path.join(source.dataDir, 'upload-signing.key'), `${'b'.repeat(64)}\n`, { mode: 0o600 });
      manifest = (await backup(source.config, pristine)) as Manifest;
      assert.equal(manifest.objects.length, 3);
      assert.ok(manifest.files['upload-signing.key']);
      await source.close();
    });

    after(() => fs.rmSync(scratch, { recursive: true, force: true }));

    /** A new case: a copy of the backup, a decoy folder beside it, an empty target and its environment. */
    async function setUp() {
      const work = path.join(scratch, `case-${++cases}`);
      const copy = path.join(work, 'backup');
      fs.cpSync(pristine, copy, { recursive: true });
      const decoy = path.join(work, 'decoy');
      fs.mkdirSync(path.join(decoy, 'objects', '.tmp'), { recursive: true });
      fs.mkdirSync(path.join(decoy, 'objects', 'uploads'), { recursive: true });
      fs.writeFileSync(path.join(decoy, 'objects', '.tmp', 'upload-in-progress'), 'a live upload');
      fs.writeFileSync(path.join(decoy, 'secret'), 'not for the backup');
      // The decoy holds the backup's objects too, byte for byte: a link to them would pass a checksum.
      for (const object of manifest.objects) {
        fs.mkdirSync(path.dirname(path.join(decoy, 'objects', object.key)), { recursive: true });
        fs.copyFileSync(path.join(pristine, 'objects', object.key), path.join(decoy, 'objects', object.key));
      }
      fs.copyFileSync(path.join(pristine, 'upload-signing.key'), path.join(decoy, 'upload-signing.key'));
      const target = path.join(work, 'target');
      fs.mkdirSync(target);
      const database = await freshDatabase(dialect, target);
      const databaseUrl = dialect === 'sqlite' ? `sqlite:${path.join(target, 'imgapi.db')}` : database.url;
      const env = { DATA_DIR: target, DATABASE_URL: databaseUrl };
      return { work, copy, decoy, target, env, drop: database.drop };
    }

    async function assertEmptyDatabase(env: Record<string, string>) {
      if (dialect === 'sqlite') return assert.ok(!fs.existsSync(path.join(env.DATA_DIR!, 'imgapi.db')), 'no database file');
      const database = await openDatabase(loadConfig(env).database);
      try {
        assert.equal(await holdsRows(database), undefined, 'no rows in the target database');
      } finally {
        await database.close();
      }
    }

    /**
     * Restores the tampered copy: refused with `message`, nothing written (decoy and target as
     * before, `target.prepare` having set the target up); then, after `target.fix`, the
     * untampered backup restores there.
     */
    async function refused(
      tamper: Tamper,
      message: RegExp,
      { prepare, fix }: { prepare?: (target: string) => void; fix?: (target: string) => void } = {},
    ) {
      const { copy, decoy, target, env, drop } = await setUp();
      try {
        const changed = tamper(copy, structuredClone(manifest));
        if (changed) fs.writeFileSync(path.join(copy, 'manifest.json'), JSON.stringify(changed));
        prepare?.(target);
        const decoyBefore = tree(decoy);
        const targetBefore = tree(target);
        const backupBefore = tree(copy);
        await assert.rejects(restore(loadConfig(env), copy), (err: Error) => {
          assert.ok(err instanceof OpsError, err.stack);
          assert.match(err.message, message);
          assert.doesNotMatch(err.message, /\n/, 'one line');
          return true;
        });
        assert.deepEqual(tree(decoy), decoyBefore, 'the decoy folder is untouched');
        assert.deepEqual(tree(target), targetBefore, 'the target is as it was');
        assert.deepEqual(tree(copy), backupBefore, 'restore writes nothing into the backup');
        await assertEmptyDatabase(env);

        // The backup as made restores into that same target.
        fix?.(target);
        const pristineBefore = tree(pristine);
        const report = await restore(loadConfig(env), pristine);
        assert.deepEqual(tree(pristine), pristineBefore, 'restore writes nothing into the backup');
        assert.deepEqual(report.counts, manifest.counts);
        assert.equal(report.objects, manifest.objects.length);
        for (const object of manifest.objects) assert.equal(sha256(fs.readFileSync(path.join(target, 'objects', object.key))), object.sha256);
        assert.deepEqual(tree(decoy), decoyBefore, 'the decoy folder is untouched');
      } finally {
        await drop();
      }
    }

    // Refusals that come before the target's database is written run on SQLite only: on
    // PostgreSQL they would test nothing more, at a PostgreSQL database per case.
    const early = dialect === 'sqlite' ? it : () => {};
    const object = (n = 0) => manifest.objects[n]!;
    /** Replaces a file of the backup with `make(file)`. */
    const replace = (make: (file: string) => void) => (file: string) => {
      fs.rmSync(file, { recursive: true });
      make(file);
    };

    early('refuses names in manifest.files that are not the signing key: ../, absolute, backslashes, NUL', async () => {
      for (const name of ['../decoy/secret', '../../evil', '/etc/passwd', '..\\..\\evil', 'upload-signing.key\u0000', 'objects/x'])
        await refused(
          (_dir, m) => ({ ...m, files: { ...m.files, [name]: { size: 18, sha256: sha256('not for the backup') } } }),
          new RegExp(`manifest\\.json files has an unknown field ${escape(JSON.stringify(name))}`),
        );
    });

    early('refuses object keys the service does not write: ../, absolute, backslashes, NUL, previews', async () => {
      for (const key of [
        '../decoy/secret',
        'uploads/../../decoy/secret',
        '/etc/passwd',
        'uploads\\..\\..\\secret',
        `${object().key}\u0000`,
        'previews/file_abc/256',
      ])
        await refused(
          (_dir, m) => {
            m.objects[0]!.key = key;
            return m;
          },
          new RegExp(`manifest\\.json objects\\[0\\]\\.key ${escape(JSON.stringify(key))} is not a key this service stores`),
        );
    });

    early("reads objects only from the backup's own objects/ folder, whatever storage.directory says, and deletes nothing there", async () => {
      for (const directory of ['../decoy/objects', '/tmp', 'objects/../../decoy/objects'])
        await refused(
          (_dir, m) => ({ ...m, storage: { ...m.storage, directory } as Manifest['storage'] }),
          /manifest\.json storage\.directory is ".*", not "objects"/,
        );
    });

    early('refuses symbolic links: to a file outside, to a directory, as the signing key and as the manifest', async () => {
      await refused(
        (dir) =>
          replace((file) => fs.symlinkSync(path.join(dir, '..', 'decoy', 'objects', object().key), file))(path.join(dir, 'objects', object().key)),
        new RegExp(`backup entry "objects/${escape(object().key)}" is a symbolic link`),
      );
      await refused(
        (dir) => replace((file) => fs.symlinkSync(path.join(dir, '..', 'decoy', 'objects', 'uploads'), file))(path.join(dir, 'objects', 'uploads')),
        /backup entry "objects\/uploads" is a symbolic link/,
      );
      await refused(
        (dir) => replace((file) => fs.symlinkSync(path.join(dir, '..', 'decoy', 'upload-signing.key'), file))(path.join(dir, 'upload-signing.key')),
        /backup entry "upload-signing.key" is a symbolic link/,
      );
      await refused((dir) => {
        fs.renameSync(path.join(dir, 'manifest.json'), path.join(dir, '..', 'manifest.json'));
        fs.symlinkSync(path.join(dir, '..', 'manifest.json'), path.join(dir, 'manifest.json'));
      }, /backup entry "manifest.json" is a symbolic link/);
    });

    early('refuses a hard link to a file outside, a FIFO, a missing object, and folders nested deeper than a backup makes', async () => {
      await refused((dir) => {
        fs.mkdirSync(path.join(dir, 'objects', ...'abcdefghij'), { recursive: true });
      }, /is nested deeper than any backup's folders/);
      await refused(
        (dir) =>
          replace((file) => fs.linkSync(path.join(dir, '..', 'decoy', 'objects', object(1).key), file))(path.join(dir, 'objects', object(1).key)),
        new RegExp(`backup entry "objects/${escape(object(1).key)}" has 2 hard links`),
      );
      await refused(
        (dir) => replace((file) => execFileSync('mkfifo', [file]))(path.join(dir, 'objects', object(1).key)),
        /is a device, FIFO or socket/,
      );
      await refused(
        (dir) => fs.rmSync(path.join(dir, 'objects', object(2).key)),
        new RegExp(`backup entry "objects/${escape(object(2).key)}" is missing`),
      );
    });

    early('refuses bytes that differ from the manifest, the last object too: nothing of what was checked before is written', async () => {
      const last = manifest.objects.at(-1)!;
      await refused(
        (dir) => fs.appendFileSync(path.join(dir, 'objects', last.key), 'x'),
        /does not match its checksum in the manifest \(\d+ bytes, not \d+\)/,
      );
      await refused((dir) => {
        const file = path.join(dir, 'objects', last.key);
        const bytes = fs.readFileSync(file);
        bytes[bytes.length - 1]! ^= 1;
        fs.writeFileSync(file, bytes);
      }, /does not match its checksum in the manifest: the backup is damaged/);
      await refused((_dir, m) => {
        m.objects.at(-1)!.sha256 = '0'.repeat(64);
        return m;
      }, /does not match its checksum in the manifest/);
      await refused((_dir, m) => {
        m.objects.at(-1)!.size += 1;
        m.storage.bytes += 1;
        return m;
      }, /does not match its checksum in the manifest/);
    });

    it('refuses a database whose row counts or objects differ from the manifest (the final check), writing nothing', async () => {
      await refused((_dir, m) => {
        m.counts.files += 1;
        return m;
      }, /imgapi\.db holds \d+ rows in files, manifest\.json counts \d+: the backup is damaged/);
      await refused(
        (_dir, m) => {
          const [dropped] = m.objects.splice(1, 1);
          m.storage.count -= 1;
          m.storage.bytes -= dropped!.size;
          return m;
        },
        new RegExp(`imgapi\\.db refers to the object "${escape(object(1).key)}", which manifest\\.json does not list`),
      );
    });

    early('refuses a truncated database, whether or not the manifest was made to match it', async () => {
      const truncate = (dir: string) => {
        const file = path.join(dir, 'imgapi.db');
        fs.truncateSync(file, Math.floor(fs.statSync(file).size / 2));
        return fs.readFileSync(file);
      };
      await refused((dir) => void truncate(dir), /backup entry "imgapi\.db" does not match its checksum in the manifest/);
      await refused((dir, m) => {
        const bytes = truncate(dir);
        m.database.size = bytes.length;
        m.database.sha256 = sha256(bytes);
        return m;
      }, /backup entry imgapi\.db is not a sound SQLite database \(SQLITE_\w+\)/);
    });

    early('refuses unknown fields, another version, a missing field, a manifest that is not JSON and none at all', async () => {
      await refused((_dir, m) => ({ ...m, extra: true }), /manifest\.json top level has an unknown field "extra"/);
      await refused((_dir, m) => {
        (m.objects[1] as unknown as Record<string, unknown>).path = '../decoy/secret';
        return m;
      }, /manifest\.json objects\[1\] has an unknown field "path"/);
      await refused((_dir, m) => ({ ...m, version: 2 as 1 }), /manifest\.json version is 2; this imgapi reads version 1/);
      await refused(
        (_dir, m) => ({ ...m, database: { ...m.database, file: '../decoy/imgapi.db' as 'imgapi.db' } }),
        /manifest\.json database\.file is "\.\.\/decoy\/imgapi\.db", not "imgapi\.db"/,
      );
      await refused((_dir, m) => {
        delete (m as Partial<Manifest>).counts;
        return m;
      }, /manifest\.json top level lacks the field "counts"/);
      await refused((dir) => fs.writeFileSync(path.join(dir, 'manifest.json'), '{"format": "imgapi-backup", '), /manifest\.json is not JSON/);
      await refused((dir) => fs.rmSync(path.join(dir, 'manifest.json')), /backup holds no manifest\.json: not a backup, or one that did not finish/);
    });

    it('undoes what it placed when a later step fails: the target is left exactly as it was', async () => {
      // An empty directory where the last object goes: the target counts as empty, and placing
      // that object fails after the others are in place.
      const last = manifest.objects.at(-1)!;
      await refused(() => {}, new RegExp(`objects/${escape(last.key)} already exists: restore needs an empty target`), {
        prepare: (target) => fs.mkdirSync(path.join(target, 'objects', last.key), { recursive: true }),
        fix: (target) => fs.rmdirSync(path.join(target, 'objects', last.key)),
      });
    });

    early(
      "into a bucket: refuses one that holds any of the backup's objects and damaged bytes, uploading nothing; then uploads and reads back",
      async () => {
        const s3 = await startS3rver('imgapi-restore');
        const { copy, target, drop } = await setUp();
        try {
          const env = { DATA_DIR: target, DATABASE_URL: `sqlite:${path.join(target, 'imgapi.db')}`, ...s3.env };
          const bucket = new S3Storage(s3.storageConfig);
          const squatted = object(1).key;
          await bucket.put(squatted, Readable.from([Buffer.from("somebody else's")]));
          await assert.rejects(restore(loadConfig(env), pristine), /the bucket already holds 1 of the backup's objects \(uploads\/file_/);
          assert.deepEqual(await s3.listKeys(), [squatted], 'nothing uploaded');
          assert.equal((await hashObject(bucket, squatted))?.sha256, sha256("somebody else's"), "the bucket's object untouched");
          await bucket.delete(squatted);

          fs.appendFileSync(path.join(copy, 'objects', manifest.objects.at(-1)!.key), 'x');
          await assert.rejects(restore(loadConfig(env), copy), /does not match its checksum in the manifest/);
          assert.deepEqual(await s3.listKeys(), [], 'nothing uploaded');
          assert.ok(!fs.existsSync(path.join(target, 'imgapi.db')));

          assert.deepEqual((await restore(loadConfig(env), pristine)).counts, manifest.counts);
          assert.deepEqual((await s3.listKeys()).sort(), manifest.objects.map((o) => o.key).sort());
          for (const entry of manifest.objects) assert.equal((await hashObject(bucket, entry.key))?.sha256, entry.sha256, entry.key);
          bucket.close?.();
        } finally {
          await drop();
          await s3.stop();
        }
      },
    );

    it("puts the backup's signing key in place of one the empty target has, and keeps the target's when it refuses", async () => {
      const theirs = `${'c'.repeat(64)}\n`;
      // Refused: the target's key stays (refused() compares the target before and after).
      await refused((dir) => fs.appendFileSync(path.join(dir, 'imgapi.db'), 'x'), /imgapi\.db/, {
        prepare: (target) => fs.writeFileSync(path.join(target, 'upload-signing.key'), theirs, { mode: 0o600 }),
      });
      const { target, env, drop } = await setUp();
      try {
        fs.writeFileSync(path.join(target, 'upload-signing.key'), theirs, { mode: 0o600 });
        const logged: string[] = [];
        await restore(loadConfig(env), pristine, (line) => logged.push(line));
        assert.equal(
          fs.readFileSync(path.join(target, 'upload-signing.key'), 'utf8'),
          fs.readFileSync(path.join(pristine, 'upload-signing.key'), 'utf8'),
        );
        assert.equal(fs.statSync(path.join(target, 'upload-signing.key')).mode & 0o777, 0o600);
        assert.ok(
          logged.some((line) => /upload-signing\.key: the target's key was replaced by the backup's/.test(line)),
          logged.join('\n'),
        );
        assert.deepEqual(
          fs.readdirSync(target).filter((name) => name.startsWith('.restore-')),
          [],
          'no staging directory left',
        );
      } finally {
        await drop();
      }
    });
  });
}

/** `text` as a literal in a RegExp. */
function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('restore of a backup whose objects are in S3 (SQLite target)', () => {
  const scratch = tempDir('imgapi-restore-s3-');
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  it('checks them in the bucket and writes nothing when one differs; refuses a local target', async () => {
    const s3 = await startS3rver('imgapi-restore-s3');
    const server = await startServer({ dialect: 'sqlite', workers: 0, env: s3.env });
    const bucket = new S3Storage(s3.storageConfig);
    try {
      const client = new Client(server.url, await server.newKey());
      for (const seed of [1, 2])
        await client.uploadOk(
          await sharp({ create: { width: 10 + seed, height: 10, channels: 3, background: '#336699' } })
            .png()
            .toBuffer(),
          `${seed}.png`,
        );
      const dir = path.join(scratch, 'backup');
      const made = await backup(server.config, dir);
      assert.equal(made.storage.kind, 's3');
      assert.equal(made.objects.length, 2);
      const keys = await s3.listKeys();

      const local = path.join(scratch, 'local');
      await assert.rejects(
        restore(loadConfig({ DATA_DIR: local }), dir),
        /this backup's objects are in the S3 bucket imgapi-restore-s3: restore with STORAGE=s3/,
      );
      assert.ok(!fs.existsSync(local), 'nothing written');

      const target = path.join(scratch, 'target');
      const env = { DATA_DIR: target, DATABASE_URL: `sqlite:${path.join(target, 'imgapi.db')}`, ...s3.env };
      const changed = made.objects[0]!.key;
      const original: Buffer[] = [];
      for await (const chunk of await bucket.get(changed)) original.push(chunk as Buffer);
      await bucket.put(changed, Readable.from([Buffer.from('other bytes')]));
      await assert.rejects(
        restore(loadConfig(env), dir),
        new RegExp(`the object "${escape(changed)}" in the bucket does not match its checksum in the manifest`),
      );
      assert.deepEqual(tree(target), {}, 'nothing left in the target');
      assert.deepEqual(await s3.listKeys(), keys, 'nothing written to the bucket');

      await bucket.put(changed, Readable.from(original));
      assert.deepEqual((await restore(loadConfig(env), dir)).counts, made.counts);
      assert.deepEqual(await s3.listKeys(), keys);
    } finally {
      bucket.close?.();
      await server.close();
      await s3.stop();
    }
  });
});
