// The metrics ops/alerts.yml alerts on: each one it names is served by /metrics, and the
// queue's age, the readiness checks and the disk figures say what they should.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { ManualClock } from '../../src/clock.js';
import { Client, REPO_ROOT, startServer, type TestServer } from '../helpers.js';

const sample = (text: string, name: string, labels = ''): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
};

describe('metrics for the alert rules', () => {
  let server: TestServer;
  const clock = new ManualClock();

  before(async () => {
    server = await startServer({ dialect: 'sqlite', workers: 0, clock });
  });
  after(async () => {
    await server?.close();
  });

  it('serves every metric ops/alerts.yml names', async () => {
    const rules = fs.readFileSync(path.join(REPO_ROOT, 'ops', 'alerts.yml'), 'utf8');
    const names = new Set([...rules.matchAll(/\b(imgapi_[a-z_]+)/g)].map((m) => m[1]!.replace(/_(count|sum|bucket)$/, '')));
    assert.ok(names.size >= 6, [...names].join(', '));
    const text = (await new Client(server.url).get('/metrics')).body.toString('utf8') as string;
    for (const name of names) assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), `${name} is not served`);
  });

  it('reports the oldest queued task, the readiness checks and the disk', async () => {
    const client = new Client(server.url, await server.newKey('pro'));
    const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    const fileId = await client.uploadOk(png, 'a.png');
    assert.equal((await client.post('/api/process/convert', { fileId, format: 'webp' })).status, 202);
    clock.advance(90_000);

    const text = (await new Client(server.url).get('/metrics')).body.toString('utf8') as string;
    const age = sample(text, 'imgapi_queue_oldest_age_seconds')!;
    assert.ok(age >= 90 && age < 90 + 600, `oldest queued task waited ${age} s`);
    assert.equal(sample(text, 'imgapi_queue_depth', '{status="queued"}'), 1);
    assert.equal(sample(text, 'imgapi_check_up', '{check="database"}'), 1);
    assert.equal(sample(text, 'imgapi_check_up', '{check="storage"}'), 1);
    const available = sample(text, 'imgapi_data_dir_available_bytes')!;
    const size = sample(text, 'imgapi_data_dir_size_bytes')!;
    assert.ok(available > 0 && size >= available, `${available} of ${size} bytes available`);
  });
});
