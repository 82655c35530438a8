// The playground and the keys page show the call and keep the work, in a real browser (Debian's
// Chromium, driven by playwright-core): a new key comes with curl/SDK/CLI snippets and "Test
// this key"; the form checks options in the browser and says what is wrong once, in plain
// words, before any request; the curl copied from a result runs (bash + curl against this
// server) and yields the same output bytes; each run replaces the results and joins the history;
// a watermark's logo is never processed as an input; stored files are inputs too; a batch shows
// its totals and a ZIP of all. Screenshots of the playground and keys pages, desktop and 390 px,
// go to test-output/screenshots/ (printed below).
// SQLite is enough here: what runs behind these pages is covered on every dialect elsewhere.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { chromium, type Browser, type Page } from 'playwright-core';
import sharp from 'sharp';
import { findAccountByEmail, setPlan } from '../../src/accounts/accounts.js';
import { Client, REPO_ROOT, corpusFile, ensureDashboardBuilt, startServer, tempDir, type TestServer } from '../helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = path.join(REPO_ROOT, 'test-output', 'screenshots');
const JPEG = corpusFile('images/sharp/320x240.jpg');
const PNG = corpusFile('images/sharp/Flag_of_the_Netherlands-alpha.png');
const USER = { email: 'playground@example.com', password: 'playground-password-1' };
const run = promisify(execFile);

const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core's violations on the page as it is, one line each. */
async function axeViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    type Violation = { id: string; help: string; nodes: { target: string[] }[] };
    const axe = (window as unknown as { axe: { run: (context: Document, options: object) => Promise<{ violations: Violation[] }> } }).axe;
    const { violations } = await axe.run(document, { resultTypes: ['violations'] });
    return violations.map(
      (v) =>
        `${v.id}: ${v.help} — ${v.nodes
          .slice(0, 4)
          .map((n) => n.target.join(' '))
          .join('; ')}`,
    );
  });
}

describe('playground and keys: the call shown, the work kept', { timeout: 300_000 }, () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  let apiKey: string;
  let client: Client;
  const processCalls: string[] = [];
  const pageErrors: string[] = [];

  const shoot = async (name: string) => {
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  };
  /**
   * Desktop and 390 px screenshots of the page as it is (light; dark on the desktop too): axe-core
   * finds nothing in either theme or size, and at 390 px nothing is wider than the screen.
   */
  const shootBoth = async (name: string) => {
    const problems: string[] = [];
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const width of [1280, 390]) {
        await page.setViewportSize({ width, height: width === 390 ? 844 : 900 });
        await page.waitForTimeout(200);
        const where = `${name} ${scheme} ${width} px`;
        const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
        if (widths.scroll > widths.inner) problems.push(`${where}: ${widths.scroll} px wide`);
        for (const violation of await axeViolations(page)) problems.push(`${where}: ${violation}`);
        if (scheme === 'light' || width === 1280) await shoot(`${name}-${width === 390 ? '390' : 'desktop'}${scheme === 'dark' ? '-dark' : ''}`);
      }
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 1280, height: 900 });
    assert.deepEqual(problems, []);
  };
  const results = () => page.getByTestId('results');
  const waitCompleted = async (count = 1) => {
    await results()
      .locator('li[data-status=completed]')
      .nth(count - 1)
      .waitFor({ timeout: 90_000 });
  };

  before(async () => {
    ensureDashboardBuilt();
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    console.log(`playground screenshots: ${SCREENSHOTS}`);
    server = await startServer({ env: { SIGNUP_MODE: 'open' }, workers: 2 });
    assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: scripts/setup.mjs --test installs Debian's chromium package`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-quic'],
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('request', (request) => {
      if (request.method() === 'POST' && /\/api\/process\//.test(request.url())) processCalls.push(request.url());
    });
    await page.goto(`${server.url}/signup`);
    await page.getByLabel('Email').fill(USER.email);
    await page.getByLabel('Password').fill(USER.password);
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.getByTestId('plan-badge').waitFor();
    const account = await findAccountByEmail(server.services.database, USER.email);
    assert.ok(account);
    await setPlan(server.services.database, account.id, 'pro');
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    console.log(`playground screenshots: ${SCREENSHOTS}`);
  });

  it('an empty account sees the four steps of the typical flow', async () => {
    await page.goto(`${server.url}/`);
    const panel = page.getByTestId('getting-started');
    await panel.waitFor();
    assert.equal(await panel.locator('ol.steps > li').count(), 4);
    for (const step of ['Upload', 'Start a job', 'Poll', 'Download']) await panel.getByText(step, { exact: true }).waitFor();
  });

  it('a new key comes with curl, SDK and CLI snippets for this origin, and "Test this key" answers', async () => {
    await page.goto(`${server.url}/keys`);
    await page.getByLabel('Name').fill('laptop');
    await page.getByRole('button', { name: 'Create key' }).click();
    apiKey = (await page.getByTestId('new-key-value').textContent())!.trim();
    assert.match(apiKey, /^ik_/);
    client = new Client(server.url, apiKey);
    const snippets = page.getByTestId('key-snippets');
    for (const language of ['curl', 'sdk', 'cli']) {
      await snippets.locator(`button[data-language=${language}]`).click();
      const code = (await snippets.locator('pre').textContent())!;
      assert.ok(code.includes(server.url), `${language}: the real origin`);
      assert.ok(code.includes(apiKey), `${language}: the full new key`);
    }
    await snippets.locator('button[data-language=curl]').click();
    // The curl snippet's first call, run for real: the account answers with the key.
    const curl = (await snippets.locator('pre').textContent())!;
    const firstCall = curl.split('\n').filter((line) => line.startsWith('export ') || line.includes('/api/account"'));
    const { stdout } = await run('bash', ['-c', `set -e\n${firstCall.join('\n')}`]);
    assert.equal(JSON.parse(stdout).data.email, USER.email);

    await page.getByTestId('test-key').click();
    const answer = page.getByTestId('test-key-answer');
    await answer.getByText('HTTP 200').waitFor();
    assert.match((await answer.textContent())!, /"plan": "pro"/);
    // The list is read again after the test: the key's "Last used" shows the call just made.
    const row = page.locator('tr', { hasText: 'laptop' });
    await row.getByText(/just now|\d+ s/).waitFor();
    await shootBoth('keys-new-key');
  });

  it('checks options in the browser: one plain message beside the field, and nothing is sent', async () => {
    await page.goto(`${server.url}/playground`);
    await page.getByTestId('kind').selectOption('compress');
    // Descriptions are Markdown, rendered: `result.quality` is code, not backticks.
    const help = page.locator('[data-field=quality] .help');
    await help.locator('code').first().waitFor();
    assert.doesNotMatch((await help.textContent())!, /`/);
    await page.getByTestId('file-input').setInputFiles(JPEG);
    await page.locator('[data-testid=picked-files] li[data-state=uploaded]').waitFor();
    await page.locator('#option-quality').fill('500');
    const before = processCalls.length;
    await page.getByTestId('run').click();
    const problem = page.getByTestId('problem-quality');
    await problem.waitFor();
    assert.equal((await problem.textContent())!.trim(), 'Enter a number from 1 to 100, or "auto".');
    assert.equal(await page.getByText('Enter a number from 1 to 100').count(), 1, 'said once');
    assert.equal(processCalls.length, before, 'no request was sent');
    // Options that exclude each other: quality given, so targetSize and lossless are off.
    assert.equal(await page.locator('#option-targetSize').isDisabled(), true);
    assert.equal(await page.locator('#option-lossless').isDisabled(), true);
    await page.locator('#option-quality').fill('50');
    await problem.waitFor({ state: 'detached' });
  });

  it('the curl copied from a result runs and yields the same output', async () => {
    await page.getByTestId('run').click();
    await waitCompleted();
    const task = await page.locator('[data-testid=results] li').first().getAttribute('data-task-id');
    const panel = page.getByTestId('api-request');
    await panel.locator('summary').click();
    await panel.locator('button[data-language=curl]').click();
    await panel.getByRole('button', { name: /Copy as curl/ }).click();
    const curl = await page.evaluate(() => navigator.clipboard.readText());
    assert.equal(curl, await panel.locator('pre').textContent(), 'the copy is the code shown');
    assert.match(curl, /"quality":50/);

    const dir = tempDir('imgapi-curl-');
    try {
      // Asynchronously: the server answering it runs in this process.
      await run('bash', ['-c', curl], { cwd: dir, env: { ...process.env, IMGAPI_KEY: apiKey }, timeout: 120_000 }).catch(
        (error: Error & { stderr?: string }) => {
          assert.fail(`the curl script failed:\n${curl}\n${error.stderr ?? error.message}`);
        },
      );
      const written = fs.readdirSync(dir).filter((name) => name.endsWith('.jpg'));
      assert.equal(written.length, 1, `curl wrote ${fs.readdirSync(dir).join(', ')}`);
      const ours = fs.readFileSync(path.join(dir, written[0]!));
      const original = (await client.get(`/api/tasks/${task}`)).body.data;
      // Under the service's own name for it (`<stem>.compress-q50.jpg`), not one the page made up.
      assert.equal(written[0], (await client.get(`/api/files/${original.outputFileId}`)).body.data.filename);
      assert.match(written[0]!, /\.compress-q50\.jpg$/);
      const theirs = await fetch(`${server.url}/api/download/${original.outputFileId}`, { headers: { 'x-api-key': apiKey } });
      const bytes = Buffer.from(await theirs.arrayBuffer());
      const [a, b] = [await sharp(ours).metadata(), await sharp(bytes).metadata()];
      assert.deepEqual([a.format, a.width, a.height], [b.format, b.width, b.height]);
      assert.ok(ours.equals(bytes), 'the same bytes as the playground run');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    // Savings are shown for compress: size is the point.
    assert.match((await page.getByTestId('result-meta').textContent())!, /smaller|same size/);
  });

  it('each run replaces the results; the history keeps the earlier ones', async () => {
    await page.getByTestId('kind').selectOption('rotate');
    await page.locator('#option-angle').fill('90');
    await page.getByTestId('run').click();
    await page.locator('[data-testid=results-card][data-run="2"]').waitFor();
    await waitCompleted();
    assert.equal(await page.getByTestId('results-card').count(), 1, 'one results view');
    // A rotate says nothing about savings ("519 % larger" is meaningless here).
    const meta = (await page.getByTestId('result-meta').textContent())!;
    assert.doesNotMatch(meta, /larger|smaller|%/);
    const history = page.getByTestId('history');
    assert.equal(await history.locator('li').count(), 2);
    await history.locator('li[data-run="1"]').getByRole('button', { name: 'Show' }).click();
    await page.locator('[data-testid=results-card][data-run="1"]').waitFor();
    await waitCompleted();
    assert.match((await page.getByTestId('run-summary').textContent())!, /compress · quality=50/);
    // A run stopped by the form's check clears the results too: no old results under a new error.
    await page.getByTestId('kind').selectOption('flip');
    await page.getByTestId('run').click(); // direction is required
    await page.getByTestId('problem-direction').waitFor();
    assert.equal(await page.getByTestId('results-card').count(), 0);
    assert.equal(await page.getByTestId('history').locator('li').count(), 2, 'nothing new was run');
  });

  it("a watermark's logo is chosen on its own and never processed", async () => {
    const tasksBefore = (await client.get('/api/tasks?limit=100')).body.data.tasks.length;
    await page.getByTestId('kind').selectOption('watermark');
    await page.getByTestId('logo-input').setInputFiles(PNG);
    await page.locator('#option-logoFileId option:checked', { hasText: path.basename(PNG) }).waitFor({ state: 'attached' });
    const logoId = await page.locator('#option-logoFileId').inputValue();
    assert.match(logoId, /^file_/);
    // One input still: the logo is not among them, and text options are off.
    assert.equal(await page.locator('[data-testid=picked-files] li').count(), 1);
    assert.equal(await page.locator('#option-text').isDisabled(), true);
    assert.equal(await page.locator('#option-fontSize').isDisabled(), true);
    await page.getByText('Runs one watermark task.').waitFor();
    await page.getByTestId('run').click();
    await page.locator('[data-testid=results-card][data-run="3"]').waitFor();
    await waitCompleted();
    assert.equal(await results().locator('li').count(), 1);
    const tasks = (await client.get('/api/tasks?limit=100')).body.data.tasks as { input: { fileId?: string }; options: Record<string, unknown> }[];
    assert.equal(tasks.length, tasksBefore + 1, 'one task for one input');
    assert.equal(tasks[0]!.options.logoFileId, logoId);
    assert.ok(!tasks.some((t) => t.input.fileId === logoId), 'the logo is no task input');
    const files = (await client.get('/api/files?limit=100')).body.data.files as { origin: string; taskId?: string; fileId: string }[];
    const outputsOfLogo = tasks.filter((t) => t.input.fileId === logoId).length;
    assert.equal(outputsOfLogo, 0);
    assert.equal(files.filter((f) => f.origin === 'output').length, tasks.filter((t) => (t as { status?: string }).status === 'completed').length);
  });

  it('stored files are inputs: by link from Files and from the picker; a batch shows totals and a ZIP', async () => {
    const jpegId = await client.uploadOk(JPEG);
    // "Open in playground" on Files: /playground?fileId=…
    await page.goto(`${server.url}/files`);
    await page.locator(`tr[data-file-id="${jpegId}"]`).getByRole('link', { name: 'Open in playground' }).click();
    await page.waitForURL(`${server.url}/playground?fileId=${jpegId}`);
    await page.locator(`[data-testid=picked-files] li[data-file-id="${jpegId}"][data-state=uploaded]`).waitFor();
    assert.equal(await page.getByTestId('kind').inputValue(), 'compress');
    // Add a second stored file from the picker (searched by name): two inputs make a batch on Pro.
    await page.getByTestId('show-stored').click();
    const stored = page.getByTestId('stored-files');
    await stored.getByLabel('search stored files').fill('flag');
    await stored.locator('li').first().getByRole('button', { name: /add/i }).click();
    await page.locator('[data-testid=picked-files] li[data-state=uploaded]').nth(1).waitFor();
    await page.getByText('Runs a batch of 2 compress tasks.').waitFor();
    await page.locator('#option-quality').fill('60');
    await page.getByTestId('run').click();
    await waitCompleted(2);
    const zip = page.getByTestId('batch-zip');
    await zip.waitFor();
    assert.match((await page.getByTestId('batch-totals').textContent())!, /2 of 2 finished.*(saved|more)/);
    const href = (await zip.getAttribute('href'))!;
    const answer = await page.evaluate(async (url) => {
      const response = await fetch(url);
      const bytes = new Uint8Array(await response.arrayBuffer());
      return { status: response.status, type: response.headers.get('content-type'), magic: [...bytes.subarray(0, 2)] };
    }, href);
    assert.deepEqual(answer, { status: 200, type: 'application/zip', magic: [0x50, 0x4b] });
    const compare = page.getByTestId('compare').first();
    await compare.locator('img.after').waitFor();
    await compare.getByTestId('compare-zoom').selectOption('2');
    await shootBoth('playground-results');
  });

  it('the task page shows the API request that reproduces it', async () => {
    const taskId = await page.locator('[data-testid=results] li').first().getAttribute('data-task-id');
    await page.goto(`${server.url}/tasks/${taskId}`);
    const panel = page.getByTestId('api-request');
    await panel.locator('summary').click();
    await panel.locator('button[data-language=sdk]').click();
    const code = (await panel.locator('pre').textContent())!;
    assert.match(code, /imgapi\.process\("compress", \{fileId: "file_[^"]+", quality: 60\}\)/);
    await panel.locator('button[data-language=cli]').click();
    await panel
      .locator('pre', { hasText: /npx imgapi run compress (320x240\.jpg|Flag_of_the_Netherlands-alpha\.png) -o out --quality 60/ })
      .waitFor();
  });

  it('a deck shows as a slide gallery with a ZIP of all slides', async () => {
    const deckId = await client.uploadOk(corpusFile('presentations/python-pptx/tbl-cell.pptx'));
    await page.goto(`${server.url}/playground?fileId=${deckId}&kind=presentation-to-images`);
    await page.locator('[data-testid=picked-files] li[data-state=uploaded]').waitFor();
    assert.equal(await page.getByTestId('kind').inputValue(), 'presentation-to-images');
    await page.getByTestId('run').click();
    await waitCompleted();
    const gallery = page.getByTestId('slides');
    // Thumbnails load as they scroll into view, as a reader would scroll to them.
    await gallery.scrollIntoViewIfNeeded();
    await gallery.locator('li img').first().waitFor();
    const taskId = await results().locator('li').first().getAttribute('data-task-id');
    const task = (await client.get(`/api/tasks/${taskId}`)).body.data;
    assert.equal(await gallery.locator('li').count(), task.outputFileIds.length);
    assert.equal(await gallery.getByTestId('slides-zip').getAttribute('href'), `/api/download/${task.outputFileId}`);
    assert.equal(await page.getByText(/^Output \d+$/).count(), 0, 'slides are named as slides');
  });

  it('a pipeline is built step by step: added, reordered, removed, checked before sending', async (t) => {
    const jpegId = await client.uploadOk(JPEG);
    await page.goto(`${server.url}/playground?fileId=${jpegId}&kind=pipeline`);
    await page.locator('[data-testid=picked-files] li[data-state=uploaded]').waitFor();
    const kinds = await page.getByTestId('kind').locator('option').allTextContents();
    if (!kinds.includes('pipeline')) return t.skip('this service has no pipeline kind');
    await page.getByTestId('kind').selectOption('pipeline');
    const before = processCalls.length;
    await page.getByTestId('run').click();
    assert.equal((await page.getByTestId('problem-steps').textContent())!.trim(), 'Add at least one step.');
    assert.equal(processCalls.length, before, 'nothing sent without steps');
    const steps = page.getByTestId('steps');
    for (const kind of ['resize', 'rotate', 'flip']) {
      await page.getByTestId('step-kind').selectOption(kind);
      await page.getByTestId('add-step').click();
    }
    await steps.locator('li[data-step="0"] [data-field=width] input').fill('200');
    await steps.locator('li[data-step="1"] [data-field=angle] input').fill('90');
    await page.getByRole('button', { name: 'remove step 3' }).click();
    await page.getByRole('button', { name: 'move step 2 up' }).click();
    assert.deepEqual(await steps.locator('li.step').evaluateAll((items) => items.map((li) => li.getAttribute('data-kind'))), ['rotate', 'resize']);
    await page.getByTestId('run').click();
    await waitCompleted();
    // Rotated first (320×240 → 240×320), then 200 wide: the order is the editor's.
    assert.match((await page.getByTestId('result-meta').textContent())!, /200×26[67]/);
    const panel = page.getByTestId('api-request');
    await panel.locator('summary').click();
    await panel.locator('button[data-language=cli]').click();
    assert.match((await panel.locator('pre').textContent())!, /--step rotate:angle=90 --step resize:width=200/);
    assert.deepEqual(pageErrors, [], 'no uncaught errors in the pages');
  });

  it('adjust, trim and extend come from the registry as forms, and run; auto compress and limits say what they mean', async () => {
    const jpegId = await client.uploadOk(JPEG);
    const runKind = async (kind: string, fill: Record<string, string>, size: RegExp) => {
      await page.goto(`${server.url}/playground?fileId=${jpegId}&kind=${kind}`);
      await page.locator('[data-testid=picked-files] li[data-state=uploaded]').waitFor();
      await page.getByTestId('kind').selectOption(kind);
      for (const [name, value] of Object.entries(fill)) await page.locator(`#option-${name}`).fill(value);
      await page.getByTestId('run').click();
      await waitCompleted();
      assert.match((await page.getByTestId('result-meta').textContent())!, size, kind);
    };
    // The form checks the schema's ranges before sending, as for every kind.
    await page.goto(`${server.url}/playground?fileId=${jpegId}&kind=adjust`);
    await page.locator('[data-testid=picked-files] li[data-state=uploaded]').waitFor();
    await page.getByTestId('kind').selectOption('adjust');
    const before = processCalls.length;
    await page.locator('#option-blur').fill('1000');
    await page.getByTestId('run').click();
    await page.getByTestId('problem-blur').waitFor();
    assert.equal(processCalls.length, before, 'nothing sent with blur out of range');
    await runKind('adjust', { brightness: '1.3', tint: '#ff8800' }, /320×240/);
    await runKind('trim', { threshold: '20' }, /\d+×\d+/);
    await runKind('extend', { all: '10' }, /340×260/);

    // Issue #27: an "auto" compress says the quality it chose and the SSIM it kept.
    await runKind('compress', { quality: 'auto' }, /(quality \d+ chosen|lossless), SSIM (0\.\d+|1)\b/);

    // Issue #27: the plan's limits in words a person uses, with their units.
    await page.goto(`${server.url}/`);
    const limits = page.getByTestId('limits');
    await limits.waitFor();
    const rows = await limits.locator('tr').evaluateAll((trs) => trs.map((tr) => tr.textContent));
    assert.ok(rows.includes('Retention1 day'), rows.join(' | '));
    assert.ok(rows.includes('Largest file100 MiB'), rows.join(' | '));
    assert.ok(!rows.some((text) => /seconds|bytes/i.test(text ?? '')), `no raw key names: ${rows.join(' | ')}`);

    // Issue #27: the tasks chart is readable on a 390 px phone: its labels keep a readable size.
    const desktop = page.viewportSize();
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      const tick = page.getByTestId('tasks-chart').locator('text.tick').first();
      await tick.waitFor();
      // The chart lays itself out again for the new width (a media query, then a render): wait for that
      // layout, then read the labels' size; a chart that never shrinks its labels fails here.
      const height = () => tick.evaluate((el) => el.getBoundingClientRect().height);
      const deadline = Date.now() + 5_000;
      let box = await height();
      while (box < 10 && Date.now() < deadline) {
        await page.waitForTimeout(50);
        box = await height();
      }
      assert.ok(box >= 10, `chart labels are ${box.toFixed(1)} px tall at 390 px`);
    } finally {
      if (desktop) await page.setViewportSize(desktop);
    }
    assert.deepEqual(pageErrors, [], 'no uncaught errors in the pages');
  });
  it('a redact shows what it covered over its input: a box per region, where result.regions puts it', async () => {
    // Three faces: the face detector's own sample photo (labelled in test/fixtures/faces.json).
    const photo = path.join(REPO_ROOT, 'node_modules/@vladmandic/face-api/demo/sample1.jpg');
    const fileId = await client.uploadOk(photo);
    const input = (await client.get(`/api/files/${fileId}`)).body.data as { width: number; height: number };
    await page.goto(`${server.url}/playground?fileId=${fileId}&kind=redact`);
    await page.locator('[data-testid=picked-files] li[data-state=uploaded]').waitFor();
    await page.getByTestId('kind').selectOption('redact');
    await page.getByTestId('run').click();
    await waitCompleted();
    const taskId = await results().locator('li[data-status=completed]').first().getAttribute('data-task-id');
    const regions = (await client.get(`/api/tasks/${taskId}`)).body.data.result.regions as {
      left: number;
      top: number;
      width: number;
      height: number;
    }[];
    assert.ok(regions.length >= 2, JSON.stringify(regions));
    const covered = page.getByTestId('covered-regions');
    const image = covered.locator('img');
    await image.waitFor();
    await image.evaluate((img: HTMLImageElement) => img.complete || new Promise((resolve) => img.addEventListener('load', resolve, { once: true })));
    // The image and its boxes measured in one go: the results above it still load and move it down.
    const layout = await covered.evaluate((figure) => {
      const shown = figure.querySelector('img')!.getBoundingClientRect();
      const boxes = [...figure.querySelectorAll('[data-testid=face-box]')].map((box) => {
        const r = box.getBoundingClientRect();
        return { left: r.left - shown.left, top: r.top - shown.top, width: r.width, height: r.height };
      });
      return { width: shown.width, boxes };
    });
    assert.equal(layout.boxes.length, regions.length);
    const scale = layout.width / input.width;
    for (const [i, region] of regions.entries()) {
      const box = layout.boxes[i]!;
      const near = (shown: number, expected: number, what: string) =>
        assert.ok(Math.abs(shown - expected) <= 1.5, `box ${i} ${what}: ${shown} shown, ${expected} expected`);
      near(box.left, region.left * scale, 'left');
      near(box.top, region.top * scale, 'top');
      near(box.width, region.width * scale, 'width');
      near(box.height, region.height * scale, 'height');
    }
    assert.match((await covered.locator('figcaption').textContent())!, new RegExp(`Covered: ${regions.length} faces`));
  });
});
