// The dashboard end to end in a real browser (Debian's Chromium, driven by playwright-core):
// the operator sets up a fresh installation with the token from the server's log, a user signs
// up (Free), creates an API key (refused by the API: Free has no API access), runs compress in
// the playground and downloads the result, follows a task live, the operator moves the account
// to Pro and the key starts working, the user revokes the key and the API refuses it. An
// uploaded SVG with a script, opened from the dashboard's origin, never runs it.
//
// Screenshots of the main pages go to test-output/dashboard-screenshots/ (printed below).
// SQLite is enough here: the HTTP-level security tests run on every dialect.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { chromium, type Browser, type BrowserContext, type Page, type Request } from 'playwright-core';
import { announceSetupToken, setupInstructions } from '../../src/accounts/onboarding.js';
import { Client, REPO_ROOT, corpusFile, ensureDashboardBuilt, startServer, tempDir, type TestServer } from '../helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = path.join(REPO_ROOT, 'test-output', 'dashboard-screenshots');
const JPEG = corpusFile('images/sharp/320x240.jpg');
const PNG = corpusFile('images/sharp/Flag_of_the_Netherlands-alpha.png');
const OPERATOR = { email: 'operator@example.com', password: 'operator-password-1' };
const USER = { email: 'alice@example.com', password: 'alice-password-1' };
const SVG_WITH_SCRIPT = `<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64">
  <rect width="64" height="64" fill="#c62828"/>
  <script type="application/ecmascript"><![CDATA[
    document.title = 'SCRIPT RAN';
    try { localStorage.setItem('svgScriptRan', '1'); } catch (e) {}
    fetch('/svg-script-ran?cookie=' + encodeURIComponent(document.cookie)).catch(function () {});
  ]]></script>
</svg>`;

describe('dashboard in a real browser', { timeout: 240_000 }, () => {
  let server: TestServer;
  let browser: Browser;
  let setupToken: string;
  let setupLink: string;
  let operator: { context: BrowserContext; page: Page };
  let user: { context: BrowserContext; page: Page };
  let apiKey: string;
  const offOrigin: string[] = [];
  const cspViolations: string[] = [];
  const pageErrors: string[] = [];
  let shot = 0;

  const screenshot = async (page: Page, name: string) => {
    shot++;
    await page.screenshot({ path: path.join(SCREENSHOTS, `${String(shot).padStart(2, '0')}-${name}.png`), fullPage: true });
  };

  async function newBrowserContext(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true });
    context.on('request', (request: Request) => {
      const url = request.url();
      if (!url.startsWith(server.url) && !url.startsWith('data:') && !url.startsWith('blob:')) offOrigin.push(url);
    });
    const page = await context.newPage();
    page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    return { context, page };
  }

  before(async () => {
    ensureDashboardBuilt();
    fs.rmSync(SCREENSHOTS, { recursive: true, force: true });
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    console.log(`dashboard screenshots: ${SCREENSHOTS}`);
    server = await startServer({ env: { SIGNUP_MODE: 'open' }, workers: 2 });
    // The setup link exactly as an operator finds it: in the server's start-up line.
    const token = await announceSetupToken({ database: server.services.database, clock: server.services.clock, logger: pino({ level: 'silent' }) });
    assert.ok(token);
    setupToken = token;
    const line = setupInstructions(server.url, token);
    setupLink = /create one at (\S+)/.exec(line)![1]!;
    assert.equal(setupLink, `${server.url}/setup#token=${token}`, line);
    assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: scripts/setup.mjs --test installs Debian's chromium package`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        '--disable-quic',
      ],
    });
    operator = await newBrowserContext();
    user = await newBrowserContext();
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    console.log(`dashboard screenshots: ${SCREENSHOTS}`);
  });

  it('the operator sets up the installation with the link from the start-up line', async (t) => {
    t.diagnostic(`screenshots in ${SCREENSHOTS}`);
    const { page } = operator;
    await page.goto(`${server.url}/`);
    await page.waitForURL(/\/setup$/);
    // The link fills the token in, and the address bar no longer shows it.
    await page.goto('about:blank');
    await page.goto(setupLink);
    await page.waitForURL(/\/setup$/);
    assert.equal(await page.getByLabel('Setup token').inputValue(), setupToken);
    await page.getByLabel('Setup token').fill('not-the-token');
    await page.getByLabel('Operator email').fill(OPERATOR.email);
    await page.getByLabel('Password').fill(OPERATOR.password);
    await page.getByRole('button', { name: 'Create the operator account' }).click();
    await page.getByRole('alert').filter({ hasText: 'SETUP_TOKEN_INVALID' }).waitFor();
    await page.getByLabel('Setup token').fill(setupToken);
    await screenshot(page, 'setup');
    await page.getByRole('button', { name: 'Create the operator account' }).click();
    await page.getByTestId('who').filter({ hasText: OPERATOR.email }).waitFor();
    await page.getByRole('link', { name: 'Operator', exact: true }).waitFor();
    // Setup is closed now.
    const again = await new Client(server.url).post('/auth/setup', { token: setupToken, email: 'intruder@example.com', password: 'whatever-123' });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'SETUP_COMPLETED');
  });

  it('a user signs up and starts on Free', async () => {
    const { page } = user;
    await page.goto(`${server.url}/keys`);
    await page.waitForURL(/\/login\?next=%2Fkeys$/);
    await screenshot(page, 'login');
    await page.getByRole('link', { name: 'Sign up', exact: true }).click();
    await page.getByLabel('Email').fill(USER.email);
    await page.getByLabel('Password').fill(USER.password);
    await screenshot(page, 'signup');
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.getByTestId('plan-badge').filter({ hasText: 'free' }).waitFor();
    await page.getByTestId('usage-monthly').waitFor();
    await page.getByTestId('tasks-chart').waitFor();
    await screenshot(page, 'usage-free');
  });

  it('creates an API key, shown once, which the API refuses while the plan is Free', async () => {
    const { page } = user;
    await page.getByRole('link', { name: 'API keys', exact: true }).click();
    await page.getByLabel('Name').fill('ci');
    await page.getByRole('button', { name: 'Create key' }).click();
    apiKey = (await page.getByTestId('new-key-value').textContent())!.trim();
    assert.match(apiKey, /^ik_[A-Za-z0-9_-]{20,}$/);
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    await page.getByRole('button', { name: 'Copied', exact: true }).waitFor();
    const row = page.getByTestId('keys-table').locator('tr', { hasText: 'ci' });
    await row.getByText(apiKey.slice(0, 11)).waitFor();
    await screenshot(page, 'keys-created');
    // The list never shows the key again.
    await page.reload();
    await page.getByTestId('keys-table').waitFor();
    assert.equal(await page.getByText(apiKey).count(), 0, 'the key is shown only once');

    const response = await new Client(server.url, apiKey).get('/api/account');
    assert.equal(response.status, 403);
    assert.equal(response.body.error.code, 'PLAN_NO_API_ACCESS');
  });

  it('runs compress in the playground (drop and pick) and downloads the result', async () => {
    const { page } = user;
    await page.getByRole('link', { name: 'Playground', exact: true }).click();
    await page.getByTestId('kind').selectOption('compress');
    // Drag and drop: a real drop event carrying a file.
    const png = fs.readFileSync(PNG).toString('base64');
    const dataTransfer = await page.evaluateHandle((b64) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const transfer = new DataTransfer();
      transfer.items.add(new File([bytes], 'flag.png', { type: 'image/png' }));
      return transfer;
    }, png);
    await page.dispatchEvent('[data-testid=dropzone]', 'drop', { dataTransfer });
    // And the file picker.
    await page.getByTestId('file-input').setInputFiles(JPEG);
    await page.locator('[data-testid=picked-files] li[data-state=uploaded]').nth(1).waitFor();
    // The options form comes from the registry's schema: compress has quality, targetSize, lossless…
    for (const option of ['quality', 'targetSize', 'lossless', 'keepMetadata', 'format']) {
      await page.locator(`[data-field=${option}]`).waitFor();
    }
    await page.locator('#option-quality').fill('50');
    await page.getByText(/Runs 2 separate compress tasks/).waitFor(); // Free: no batches, so one task per file
    await page.getByTestId('run').click();
    await page.locator('[data-testid=results] li[data-status=completed]').nth(1).waitFor({ timeout: 60_000 });
    await page.locator('[data-testid=results] img').nth(1).waitFor();
    await screenshot(page, 'playground-results');

    const results = page.locator('[data-testid=results] li', { hasText: path.basename(JPEG) });
    const [download] = await Promise.all([page.waitForEvent('download'), results.getByTestId('result-download').click()]);
    const saved = path.join(tempDir('imgapi-download-'), download.suggestedFilename());
    await download.saveAs(saved);
    const bytes = fs.readFileSync(saved);
    assert.deepEqual([...bytes.subarray(0, 3)], [0xff, 0xd8, 0xff], 'the download is a JPEG');
    assert.ok(bytes.length < fs.statSync(JPEG).size, `compressed at quality 50: ${bytes.length} < ${fs.statSync(JPEG).size} bytes`);
    fs.rmSync(path.dirname(saved), { recursive: true, force: true });

    // An invalid option comes back from the server's schema and is shown at its field.
    await page.locator('#option-quality').fill('500');
    await page.getByTestId('run').click();
    await page.locator('[data-field=quality] .error-text').waitFor();
  });

  it('lists files with thumbnails and tasks with their status', async () => {
    const { page } = user;
    await page.getByRole('link', { name: 'Files', exact: true }).click();
    const files = page.getByTestId('files-table');
    await files.locator('tbody tr').nth(3).waitFor(); // two uploads, two outputs
    await files.locator('.thumb img').nth(3).waitFor();
    const naturalWidth = await files
      .locator('.thumb img')
      .first()
      .evaluate((img: HTMLImageElement) => img.naturalWidth);
    assert.ok(naturalWidth > 0, 'thumbnails are decoded images (via /api/preview)');
    await screenshot(page, 'files');
    await page.getByRole('link', { name: 'Tasks', exact: true }).click();
    await page.getByTestId('tasks-table').locator('tbody tr .status-completed').nth(1).waitFor();
    await screenshot(page, 'tasks');
  });

  it('the operator moves the Free account to Pro, and its key starts working', async () => {
    // Some other customer's task that fails, for the operator's list of recent failures.
    const other = new Client(server.url, await server.newKey('pro'));
    const failing = await other.post('/api/process/compress', { fileId: await other.uploadOk(JPEG), targetSize: 100 });
    assert.equal((await other.waitForTask(failing.body.data.taskId)).error?.code, 'TARGET_SIZE_UNREACHABLE');

    const { page } = operator;
    await page.getByRole('link', { name: 'Operator', exact: true }).click();
    await page.getByTestId('queue-queued').waitFor();
    await page.getByTestId('failures').getByText('TARGET_SIZE_UNREACHABLE').waitFor();
    const select = page.getByLabel(`plan of ${USER.email}`, { exact: true });
    await select.waitFor();
    await screenshot(page, 'operator');
    // Picking a plan changes nothing until Save and the confirmation (dashboard-screens.test.ts).
    await select.selectOption('pro');
    await page.getByRole('button', { name: `Save the plan of ${USER.email}` }).click();
    await page.getByTestId('confirm-dialog').getByRole('button', { name: 'Move to pro' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `${USER.email} is now on pro` })
      .waitFor();

    const client = new Client(server.url, apiKey);
    const account = await client.get('/api/account');
    assert.equal(account.status, 200, JSON.stringify(account.body));
    assert.equal(account.body.data.plan, 'pro');
    assert.equal(account.body.data.email, USER.email);
  });

  it("a task's page follows the task live until it finishes", async () => {
    const client = new Client(server.url, apiKey);
    const fileId = await client.uploadOk(JPEG);
    await server.workers.stop(); // hold the task in the queue while the page opens
    let started = false;
    try {
      const queued = await client.post('/api/process/resize', { fileId, width: 120 });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      const { page } = user;
      await page.goto(`${server.url}/tasks/${queued.body.data.taskId}`);
      const detail = page.getByTestId('task-detail');
      await detail.locator('.status-queued').waitFor();
      await detail.getByText('following live').waitFor();
      await screenshot(page, 'task-live-queued');
      server.workers.start();
      started = true;
      await detail.locator('.status-completed').waitFor({ timeout: 60_000 });
      await page.getByTestId('task-download').waitFor();
      await page.locator('.thumb-large img').waitFor();
      await screenshot(page, 'task-completed');
    } finally {
      if (!started) server.workers.start();
    }
  });

  it('revokes the key, and the API refuses it', async () => {
    const { page } = user;
    await page.getByRole('link', { name: 'API keys', exact: true }).click();
    const row = page.getByTestId('keys-table').locator('tr', { hasText: 'ci' });
    await row.getByRole('button', { name: 'Revoke' }).click();
    await row.getByRole('button', { name: 'Confirm revoke' }).click();
    await row.getByText(/revoked/).waitFor();
    await screenshot(page, 'keys-revoked');
    const response = await new Client(server.url, apiKey).get('/api/account');
    assert.equal(response.status, 401);
    assert.equal(response.body.error.code, 'API_KEY_INVALID');
  });

  it("an uploaded SVG with a script never runs it on the dashboard's origin", async () => {
    // Uploaded through the dashboard's session, as the playground does.
    const { page, context } = user;
    await page.goto(`${server.url}/files`);
    const uploaded = await page.evaluate(async (svg) => {
      const session = await (await fetch('/auth/session')).json();
      const form = new FormData();
      form.append('file', new Blob([svg], { type: 'image/svg+xml' }), 'evil.svg');
      const response = await fetch('/api/upload', { method: 'POST', body: form, headers: { 'x-csrf-token': session.data.csrfToken } });
      return { status: response.status, body: await response.json() };
    }, SVG_WITH_SCRIPT);
    assert.equal(uploaded.status, 201, JSON.stringify(uploaded.body));
    assert.equal(uploaded.body.data.format, 'svg');
    const url = `${server.url}/api/download/${uploaded.body.data.fileId}`;
    const markers: string[] = [];
    const watch = (request: Request) => {
      if (request.url().includes('/svg-script-ran')) markers.push(request.url());
    };

    // 1. As served: an attachment, so opening it downloads it instead of showing it.
    context.on('request', watch);
    const [download] = await Promise.all([page.waitForEvent('download'), page.goto(url).catch(() => undefined)]);
    assert.equal(download.suggestedFilename(), 'evil.svg');
    await page.waitForTimeout(300);

    // 2. Even shown inline (a browser that ignored Content-Disposition), `CSP: sandbox` keeps it inert.
    const inlineContext = await browser.newContext();
    const inline = { context: inlineContext, page: await inlineContext.newPage() };
    await inline.context.addCookies(await context.cookies());
    inline.context.on('request', watch);
    await inline.context.route('**/api/download/**', async (route) => {
      const response = await route.fetch();
      const headers = { ...response.headers() };
      assert.equal(headers['content-security-policy'], 'sandbox');
      assert.equal(headers['x-content-type-options'], 'nosniff');
      delete headers['content-disposition'];
      await route.fulfill({ response, headers });
    });
    await inline.page.goto(url);
    await inline.page.locator('rect').waitFor({ state: 'attached' }); // the SVG document is rendered
    await inline.page.waitForTimeout(500);
    assert.notEqual(await inline.page.title(), 'SCRIPT RAN');
    await inline.context.close();

    assert.deepEqual(markers, [], 'the SVG script did not run');
    await page.goto(`${server.url}/files`);
    assert.equal(await page.evaluate(() => localStorage.getItem('svgScriptRan')), null);

    // 3. Control: with neither header, the same file does run its script (so the checks above can see it).
    const control = await browser.newContext();
    await control.addCookies(await context.cookies());
    const ran: string[] = [];
    control.on('request', (request) => {
      if (request.url().includes('/svg-script-ran')) ran.push(request.url());
    });
    await control.route('**/api/download/**', async (route) => {
      const response = await route.fetch();
      const headers = { ...response.headers() };
      delete headers['content-disposition'];
      delete headers['content-security-policy'];
      await route.fulfill({ response, headers });
    });
    const controlPage = await control.newPage();
    await controlPage.goto(url);
    await controlPage.waitForFunction(() => document.title === 'SCRIPT RAN');
    await controlPage.waitForTimeout(300);
    assert.ok(ran.length > 0, 'the control run executes the script');
    assert.ok(!ran.some((u) => u.includes('imgapi_session')), 'the session cookie is HttpOnly: not readable by script');
    await control.close();
  });

  it('logs out, and the old session no longer works', async () => {
    const { page, context } = user;
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'imgapi_session');
    assert.ok(session, 'the session cookie is set');
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, 'Strict');
    await page.goto(`${server.url}/`);
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(/\/login$/);
    const stale = await fetch(`${server.url}/api/account`, { headers: { cookie: `imgapi_session=${session.value}` } });
    assert.equal(stale.status, 401);
  });

  it('stays on its own origin, within its Content-Security-Policy, without script errors', async () => {
    assert.deepEqual(offOrigin, [], 'no request left the server (no CDN, no fonts from elsewhere)');
    assert.deepEqual(cspViolations, [], 'nothing the dashboard does is blocked by its CSP');
    assert.deepEqual(pageErrors, [], 'no uncaught errors in the pages');
    const index = await fetch(`${server.url}/playground`);
    const csp = index.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.doesNotMatch(await index.text(), /<script(?![^>]*\bsrc=)[^>]*>/, 'index.html has no inline script');
  });
});
