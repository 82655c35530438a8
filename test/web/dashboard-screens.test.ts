// Every dashboard screen in a real browser (Debian's Chromium, driven by playwright-core), on a
// desktop and a 390 px phone, in light and dark mode (prefers-color-scheme): axe-core finds no
// accessibility violation on any page, signed out and in; no page is wider than the phone's
// screen; every page is photographed. Then what keeps a person safe: a plan change needs Save and
// a confirmation naming the account and both plans (focus and ↓ change nothing); deletes
// confirm (one file, several); unknown dashboard URLs show the dashboard's 404 page; an
// unreachable server is shown as offline, never as an empty list; and a page of many thumbnails
// on the Free plan (5 requests/s) loads without a single 429.
//
// Screenshots go to test-output/screenshots/dashboard-screens/ (git-ignored), named
// <page>-<size>-<theme>.png.
// SQLite is enough here: the HTTP-level checks (dashboard-traffic.test.ts) run on every dialect.
// TEST_DASHBOARD_DIR serves another build of web/ (one made with `vite build --outDir`) instead
// of web/dist, e.g. while web/dist is being rebuilt.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page, type Response } from 'playwright-core';
import { createAccount, createApiKey, type Account } from '../../src/accounts/accounts.js';
import { Client, REPO_ROOT, corpusFile, ensureDashboardBuilt, startServer, type TestServer } from '../helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = path.join(REPO_ROOT, 'test-output', 'screenshots', 'dashboard-screens');
const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const JPEG = corpusFile('images/sharp/320x240.jpg');
const PNG = corpusFile('images/sharp/Flag_of_the_Netherlands-alpha.png');
const OPERATOR = { email: 'operator@example.com', password: 'operator-password-1' };
const USER = { email: 'a-rather-long-address.for-wrapping@example-company.com', password: 'user-password-1' };
const FREE_RPS = 5;
const THUMBNAILS = 20; // one page of the Files list

const MODES = [
  { name: 'desktop-light', viewport: { width: 1280, height: 860 }, colorScheme: 'light' },
  { name: 'desktop-dark', viewport: { width: 1280, height: 860 }, colorScheme: 'dark' },
  { name: 'phone-light', viewport: { width: 390, height: 844 }, colorScheme: 'light' },
  { name: 'phone-dark', viewport: { width: 390, height: 844 }, colorScheme: 'dark' },
] as const;

interface Screen {
  name: string;
  path: string;
  /** What shows once the page has loaded what it shows. */
  ready: (page: Page) => Promise<unknown>;
  status?: number;
}

/** No request is still loading "Loading…" text in the page's main landmark. */
async function settled(page: Page): Promise<void> {
  await page.locator('main h1').first().waitFor();
  await page.waitForFunction(() => !document.querySelector('main')?.textContent?.includes('Loading…'));
}

/** Every thumbnail of the Files page, each row scrolled into view (they load as they show). */
async function allThumbnails(page: Page): Promise<void> {
  const table = page.getByTestId('files-table');
  await table
    .locator('tbody tr')
    .nth(THUMBNAILS - 1)
    .waitFor();
  for (let i = 0; i < THUMBNAILS; i++) await table.locator('tbody tr').nth(i).scrollIntoViewIfNeeded();
  await table
    .locator('.thumb img')
    .nth(THUMBNAILS - 1)
    .waitFor({ timeout: 60_000 });
  await page.evaluate(() => window.scrollTo(0, 0));
}

async function axeViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (context: Document, options: object) => Promise<{ violations: any[] }> } }).axe;
    const { violations } = await axe.run(document, { resultTypes: ['violations'] });
    return violations.map(
      (v: { id: string; help: string; nodes: { target: string[]; failureSummary?: string }[] }) =>
        `${v.id}: ${v.help} — ${v.nodes
          .slice(0, 4)
          .map((n) => `${n.target.join(' ')} (${(n.failureSummary ?? '').split('\n').slice(1, 2).join('').trim()})`)
          .join('; ')}`,
    );
  });
  return result;
}

describe('every dashboard screen: accessible, fits a phone, light and dark', { timeout: 600_000 }, () => {
  let server: TestServer;
  let browser: Browser;
  let user: Account;
  let userPage: Page;
  let operatorPage: Page;
  let taskId: string;
  let receiver: http.Server;
  let receiverUrl: string;
  const received: { signature: string; body: string }[] = [];
  const pageErrors: string[] = [];

  async function newPage(): Promise<Page> {
    const context = await browser.newContext({ viewport: MODES[0].viewport });
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    return page;
  }

  async function logIn(page: Page, who: { email: string; password: string }): Promise<void> {
    await page.goto(`${server.url}/login`);
    await page.getByLabel('Email').fill(who.email);
    await page.getByLabel('Password').fill(who.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByTestId('plan-badge').waitFor();
  }

  /** Every mode: axe, the width at 390 px, a screenshot. Failures are collected, not thrown one by one. */
  async function checkScreens(page: Page, screens: Screen[], problems: string[]): Promise<void> {
    for (const mode of MODES) {
      await page.setViewportSize(mode.viewport);
      await page.emulateMedia({ colorScheme: mode.colorScheme });
      for (const screen of screens) {
        const response = await page.goto(`${server.url}${screen.path}`);
        assert.equal(response?.status(), screen.status ?? 200, `${screen.path}: status`);
        await settled(page);
        await screen.ready(page);
        const where = `${screen.name} (${mode.name})`;
        const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
        if (widths.scroll > widths.inner) problems.push(`${where}: ${widths.scroll} px wide in a ${widths.inner} px window`);
        for (const violation of await axeViolations(page)) problems.push(`${where}: ${violation}`);
        await page.screenshot({ path: path.join(SCREENSHOTS, `${screen.name}-${mode.name}.png`), fullPage: true });
      }
    }
  }

  before(async () => {
    ensureDashboardBuilt();
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    for (const file of fs.readdirSync(SCREENSHOTS)) if (file.endsWith('.png')) fs.rmSync(path.join(SCREENSHOTS, file));
    console.log(`dashboard screenshots: ${SCREENSHOTS}`);
    // The Free plan's real rate (tests raise it otherwise): the dashboard must live with it.
    server = await startServer({
      dialect: 'sqlite',
      workers: 1,
      env: {
        SIGNUP_MODE: 'invite',
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: '1', // the test's receiver is on loopback
        ...(process.env.TEST_DASHBOARD_DIR ? { DASHBOARD_DIR: process.env.TEST_DASHBOARD_DIR } : {}),
      },
      plans: { free: { requestsPerSecond: FREE_RPS } },
    });
    const { database, clock } = server.services;
    await createAccount(database, clock, { ...OPERATOR, plan: 'max', admin: true });
    // The user's files and tasks, made with a key while on Pro; then the account is on Free.
    user = await createAccount(database, clock, { ...USER, plan: 'pro' });
    const client = new Client(server.url, (await createApiKey(database, clock, user.id, 'seed')).key);
    await createApiKey(database, clock, user.id, 'production server');
    const uploads: string[] = [];
    for (let i = 0; i < THUMBNAILS + 2; i++)
      uploads.push(await client.uploadOk(i % 2 ? JPEG : PNG, `holiday-${String(i).padStart(2, '0')}.${i % 2 ? 'jpg' : 'png'}`));
    const resized = await client.post('/api/process/resize', { fileId: uploads[1], width: 120 });
    taskId = resized.body.data.taskId;
    assert.equal((await client.waitForTask(taskId)).status, 'completed');
    const failing = await client.post('/api/process/compress', { fileId: uploads[1], targetSize: 100 });
    assert.equal((await client.waitForTask(failing.body.data.taskId)).error?.code, 'TARGET_SIZE_UNREACHABLE');
    // A webhook endpoint to list, and a receiver that answers every delivery 204.
    receiver = http.createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        received.push({ signature: String(request.headers['imgapi-signature'] ?? ''), body });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
    const seeded = await client.post('/api/webhooks', { url: `${receiverUrl}?seed`, description: 'Seeded receiver' });
    assert.equal(seeded.status, 201, JSON.stringify(seeded.body));
    await database.db.updateTable('accounts').set({ plan: 'free' }).where('id', '=', user.id).execute();

    assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: scripts/setup.mjs --test installs Debian's chromium package`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
    userPage = await newPage();
    operatorPage = await newPage();
  });

  after(async () => {
    receiver?.close();
    await browser?.close();
    await server?.close();
  });

  it('a page of thumbnails on the Free plan (5 requests/s) loads without a 429', async () => {
    const page = userPage;
    const limited: string[] = [];
    const watch = (response: Response) => {
      if (response.status() === 429) limited.push(response.url());
    };
    page.on('response', watch);
    try {
      await logIn(page, USER);
      await page.getByTestId('plan-badge').filter({ hasText: 'free' }).waitFor();
      await page.goto(`${server.url}/files`);
      // Every thumbnail on the page, scrolled into view so each is fetched.
      await allThumbnails(page);
      // And around the dashboard, as a person does.
      for (const link of ['Tasks', 'Usage', 'Files', 'API keys', 'Files']) {
        await page.getByRole('link', { name: link, exact: true }).click();
        await settled(page);
      }
      await allThumbnails(page);
    } finally {
      page.off('response', watch);
    }
    assert.deepEqual(limited, [], 'no request of the dashboard was answered 429');
  });

  it('signed out: login, sign-up, setup and the 404 page pass axe and fit a phone', async () => {
    const page = await newPage();
    const problems: string[] = [];
    await checkScreens(
      page,
      [
        { name: 'login', path: '/login', ready: (p) => p.getByRole('button', { name: 'Log in' }).waitFor() },
        { name: 'signup', path: '/signup?invite=inv_example', ready: (p) => p.getByLabel('Invitation code').waitFor() },
        { name: 'setup', path: '/setup', ready: (p) => p.getByText('already has an operator account').waitFor() },
        { name: 'reset-password', path: '/reset-password?token=acct_example.0.x', ready: (p) => p.getByLabel(/New password/).waitFor() },
        { name: 'not-found-signed-out', path: '/no/such/page', status: 404, ready: (p) => p.getByTestId('not-found').waitFor() },
      ],
      problems,
    );
    await page.context().close();
    assert.deepEqual(problems, []);
  });

  it('signed in: every page of the user passes axe, fits a phone, and is photographed', async () => {
    const problems: string[] = [];
    await checkScreens(
      userPage,
      [
        { name: 'usage', path: '/', ready: (p) => p.getByTestId('tasks-chart').waitFor() },
        { name: 'playground', path: '/playground', ready: (p) => p.getByTestId('kind').waitFor() },
        {
          name: 'files',
          path: '/files',
          ready: allThumbnails,
        },
        { name: 'tasks', path: '/tasks', ready: (p) => p.getByTestId('tasks-table').locator('.status-failed').waitFor() },
        {
          name: 'task',
          path: `/tasks/${taskId}`,
          ready: async (p) => {
            await p.getByTestId('task-detail').locator('.status-completed').waitFor();
            await p.locator('.thumb-large img').waitFor();
          },
        },
        { name: 'keys', path: '/keys', ready: (p) => p.getByText('production server').first().waitFor() },
        { name: 'webhooks', path: '/webhooks', ready: (p) => p.getByTestId('webhooks-table').getByText('Seeded receiver').waitFor() },
        {
          name: 'delivery',
          path: '/delivery',
          ready: async (p) => {
            await p.getByTestId('no-renders').waitFor();
            await p.getByTestId('url-builder').locator('select[name=fileId] option').first().waitFor({ state: 'attached' });
          },
        },
        { name: 'not-found', path: '/tasks/task_x/nothing', status: 404, ready: (p) => p.getByTestId('not-found').waitFor() },
      ],
      problems,
    );
    assert.deepEqual(problems, []);
  });

  it("the operator's page passes axe, fits a phone, splits failures and shows converter health", async () => {
    const page = operatorPage;
    await logIn(page, OPERATOR);
    const problems: string[] = [];
    await checkScreens(
      page,
      [
        {
          name: 'operator',
          path: '/admin',
          ready: async (p) => {
            await p.getByTestId('health').locator('[data-check=libreoffice]').waitFor();
            await p.getByTestId('failures').getByText('TARGET_SIZE_UNREACHABLE').waitFor();
            await p.getByTestId('accounts-table').getByText(USER.email).waitFor();
          },
        },
      ],
      problems,
    );
    assert.deepEqual(problems, []);
    await page.setViewportSize(MODES[0].viewport);
    await page.emulateMedia({ colorScheme: 'light' });
    // The failure links to its task; system faults are a list of their own.
    await page.getByTestId('failures').getByRole('link').first().waitFor();
    await page.getByTestId('failures-system').waitFor();
    for (const check of ['database', 'storage', 'poppler']) await page.getByTestId('health').locator(`[data-check=${check}]`).waitFor();
  });

  it('on a phone the nav is a menu button, and error text wraps by words', async () => {
    const page = userPage;
    await page.setViewportSize(MODES[2].viewport);
    await page.emulateMedia({ colorScheme: 'light' });
    await page.goto(`${server.url}/tasks`);
    await settled(page);
    const nav = page.getByRole('navigation', { name: 'Dashboard' });
    assert.equal(await nav.isVisible(), false, 'the nav is folded away');
    const menu = page.getByRole('button', { name: 'Menu' });
    assert.equal(await menu.getAttribute('aria-expanded'), 'false');
    await menu.click();
    await nav.getByRole('link', { name: 'Files', exact: true }).click();
    await page.waitForURL(/\/files$/);
    assert.equal(await nav.isVisible(), false, 'the menu closes on navigation');
    // An error message is as tall as its words need, not a syllable per line.
    await page.goto(`${server.url}/tasks?status=failed`);
    const error = page.getByTestId('tasks-table').locator('.error-text').first();
    await error.waitFor();
    const box = (await error.boundingBox())!;
    const lineHeight = await error.evaluate((el) => parseFloat(getComputedStyle(el).lineHeight) || 20);
    const text = (await error.textContent()) ?? '';
    assert.ok(box.height / lineHeight <= Math.ceil(text.length / 12), `${text.length} characters on ${Math.round(box.height / lineHeight)} lines`);
    await page.setViewportSize(MODES[0].viewport);
  });

  it('a plan change needs Save and a confirmation naming the account and both plans', async () => {
    const page = operatorPage;
    await page.goto(`${server.url}/admin`);
    const patches: string[] = [];
    page.on('request', (request) => {
      if (request.method() === 'PATCH') patches.push(request.url());
    });
    const select = page.getByLabel(`plan of ${USER.email}`, { exact: true });
    await select.focus();
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    await page.waitForTimeout(300);
    assert.deepEqual(patches, [], 'focus and arrow keys change nothing on the server');
    const planOf = async () =>
      (await server.services.database.db.selectFrom('accounts').select('plan').where('id', '=', user.id).executeTakeFirstOrThrow()).plan;
    assert.equal(await planOf(), 'free');

    await select.selectOption('pro');
    const save = page.getByRole('button', { name: `Save the plan of ${USER.email}` });
    await save.click();
    const dialog = page.getByTestId('confirm-dialog');
    const text = (await dialog.getByTestId('plan-confirm-text').textContent()) ?? '';
    assert.match(text, new RegExp(`Move ${USER.email.replace(/\./g, '\\.')} from free to pro`));
    await page.screenshot({ path: path.join(SCREENSHOTS, 'operator-plan-confirm-desktop-light.png') });
    assert.deepEqual(await axeViolations(page), []);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.equal(await planOf(), 'free', 'Cancel changes nothing');
    assert.deepEqual(patches, []);

    await save.click();
    await dialog.getByRole('button', { name: 'Move to pro' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `${USER.email} is now on pro` })
      .waitFor();
    assert.equal(await planOf(), 'pro');
    assert.equal(patches.length, 1);
    await server.services.database.db.updateTable('accounts').set({ plan: 'free' }).where('id', '=', user.id).execute();
  });

  it('disabling an account needs a confirmation naming it, and the list marks it disabled', async () => {
    const page = operatorPage;
    const { database, clock } = server.services;
    const idle = await createAccount(database, clock, { email: 'idle@example.com', plan: 'free', password: 'a-good-password' });
    const disabledAt = async () =>
      (await database.db.selectFrom('accounts').select('disabled_at').where('id', '=', idle.id).executeTakeFirstOrThrow()).disabled_at;
    await page.goto(`${server.url}/admin`);
    const table = page.getByTestId('accounts-table');
    await table.getByText(idle.email).waitFor();
    assert.equal(await page.getByRole('button', { name: `Disable ${OPERATOR.email}` }).count(), 0, 'no Disable on the operator’s own row');
    const disable = page.getByRole('button', { name: `Disable ${idle.email}` });
    await disable.click();
    const dialog = page.getByTestId('confirm-dialog');
    assert.match((await dialog.getByTestId('disable-confirm-text').textContent()) ?? '', /^Disable idle@example\.com\?/);
    assert.deepEqual(await axeViolations(page), []);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.equal(await disabledAt(), null, 'Cancel changes nothing');

    await disable.click();
    await dialog.getByRole('button', { name: 'Disable', exact: true }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `${idle.email} is disabled` })
      .waitFor();
    await table.locator(`[data-email="${idle.email}"]`).getByTestId('disabled-badge').waitFor();
    assert.notEqual(await disabledAt(), null);
    assert.deepEqual(await axeViolations(page), []);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'operator-account-disabled-desktop-light.png') });

    await page.getByRole('button', { name: `Enable ${idle.email}` }).click();
    await dialog.getByRole('button', { name: 'Enable', exact: true }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `${idle.email} is enabled again` })
      .waitFor();
    assert.equal(await disabledAt(), null);
  });

  it('Files: search by name, and every delete confirms (one file, several)', async () => {
    const page = userPage;
    await page.goto(`${server.url}/files`);
    const table = page.getByTestId('files-table');
    await page.getByRole('searchbox', { name: 'Search files by name' }).fill('HOLIDAY-1');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=files-table] tbody tr').length === 10);
    const names = await table.getByTestId('file-name').allTextContents();
    assert.deepEqual(
      names.sort(),
      Array.from({ length: 10 }, (_, i) => `holiday-1${i}.${i % 2 ? 'jpg' : 'png'}`),
    );
    const count = async () =>
      Number(
        (
          await server.services.database.db
            .selectFrom('files')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('deleted_at', 'is', null)
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await count();

    // One file: Delete asks first; Cancel keeps it.
    const row = table.locator('tr', { hasText: 'holiday-10.png' });
    await row.getByRole('button', { name: 'Delete holiday-10.png' }).click();
    const dialog = page.getByTestId('confirm-dialog');
    await dialog.getByText('holiday-10.png').waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.equal(await count(), before);
    await row.getByRole('button', { name: 'Delete holiday-10.png' }).click();
    await dialog.getByRole('button', { name: 'Delete file' }).click();
    await page.getByRole('status').filter({ hasText: 'Deleted holiday-10.png.' }).waitFor();
    assert.equal(await count(), before - 1);

    // Several: select two, one confirmation naming both.
    await page.getByRole('checkbox', { name: 'Select holiday-11.jpg' }).check();
    await page.getByRole('checkbox', { name: 'Select holiday-12.png' }).check();
    await page.getByTestId('delete-selected').click();
    await dialog.getByText('holiday-11.jpg').waitFor();
    await dialog.getByText('holiday-12.png').waitFor();
    await dialog.getByRole('button', { name: 'Delete 2 files' }).click();
    await page.getByRole('status').filter({ hasText: 'Deleted 2 files.' }).waitFor();
    assert.equal(await count(), before - 3);
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=files-table] tbody tr').length === 7);

    // All seven at once on Free (5 writes/s): paced by the server's RateLimit headers, never refused.
    const limited: string[] = [];
    const watch = (response: Response) => {
      if (response.status() === 429) limited.push(`${response.request().method()} ${response.url()}`);
    };
    page.on('response', watch);
    try {
      await page.getByRole('checkbox', { name: 'Select every file on this page' }).check();
      await page.getByTestId('delete-selected').click();
      await dialog.getByRole('button', { name: 'Delete 7 files' }).click();
      await page.getByRole('status').filter({ hasText: 'Deleted 7 files.' }).waitFor();
      await page.getByText('No file names contain “HOLIDAY-1”.').waitFor();
    } finally {
      page.off('response', watch);
    }
    assert.deepEqual(limited, []);
    assert.equal(await count(), before - 10);
  });

  it('an unreachable server is shown as offline, never as an empty list', async () => {
    const page = userPage;
    await page.goto(`${server.url}/`);
    await settled(page);
    const tasksList = (url: URL) => url.pathname === '/api/tasks';
    await page.route(tasksList, (route) => route.abort('internetdisconnected'));
    await page.getByRole('link', { name: 'Tasks', exact: true }).click();
    const offline = page.getByTestId('offline');
    await offline.waitFor();
    assert.match((await offline.textContent()) ?? '', /Cannot reach the server/);
    assert.equal(await page.getByText('No tasks').count(), 0, 'no "No tasks" beside the offline notice');
    assert.equal(await page.getByText('Failed to fetch').count(), 0);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'tasks-offline-desktop-light.png') });
    await page.unroute(tasksList);
    await offline.getByRole('button', { name: 'Try again' }).click();
    await page.getByTestId('tasks-table').waitFor();
    assert.equal(await page.getByTestId('offline').count(), 0);
  });

  it('webhooks: add an endpoint (secret shown once), send a test, see it delivered, resend, delete after confirming', async () => {
    const page = userPage;
    await page.setViewportSize(MODES[0].viewport);
    await page.goto(`${server.url}/webhooks`);
    await page.getByLabel('Endpoint URL').fill(receiverUrl);
    await page.getByRole('checkbox', { name: /batch\.completed/ }).uncheck();
    await page.getByLabel(/Description/).fill('From the dashboard');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = (await page.getByTestId('new-webhook-secret').textContent())!.trim();
    assert.match(secret, /^whsec_[A-Za-z0-9_-]+$/);
    const row = page.getByTestId('webhooks-table').locator('tr', { hasText: 'From the dashboard' });
    await row.getByText('task.completed, task.failed, task.canceled').waitFor();
    await page.reload();
    await row.waitFor();
    assert.equal(await page.getByText(secret).count(), 0, 'the secret is shown only once');

    await row.getByRole('button', { name: `Deliveries to ${receiverUrl}` }).click();
    const deliveries = page.getByTestId('deliveries');
    await deliveries.getByRole('button', { name: 'Send test event' }).click();
    await deliveries.getByRole('status').filter({ hasText: 'webhook.test' }).waitFor();
    const delivered = deliveries.locator('tr[data-status=delivered]');
    for (let i = 0; i < 60 && (await delivered.count()) === 0; i++) {
      await page.waitForTimeout(500);
      await deliveries.getByRole('button', { name: 'Refresh' }).click();
    }
    await delivered.first().getByText('HTTP 204').waitFor();
    assert.ok(
      received.some((r) => r.body.includes('"webhook.test"') && r.signature.length > 0),
      'the receiver got a signed test event',
    );
    await page.screenshot({ path: path.join(SCREENSHOTS, 'webhooks-deliveries-desktop-light.png'), fullPage: true });
    assert.deepEqual(await axeViolations(page), []);

    const before = received.length;
    await delivered.first().getByRole('button', { name: 'Resend' }).click();
    await deliveries.getByRole('status').filter({ hasText: 'Queued webhook.test again' }).waitFor();
    for (let i = 0; i < 60 && received.length === before; i++) await page.waitForTimeout(500);
    assert.ok(received.length > before, 'the resent event arrived');

    await row.getByRole('button', { name: `Delete ${receiverUrl}` }).click();
    const dialog = page.getByTestId('confirm-dialog');
    await dialog.getByText(receiverUrl).waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await row.waitFor();
    await row.getByRole('button', { name: `Delete ${receiverUrl}` }).click();
    await dialog.getByRole('button', { name: 'Delete endpoint' }).click();
    await row.waitFor({ state: 'detached' });
    const left = await server.services.database.db.selectFrom('webhooks').select('url').where('account_id', '=', user.id).execute();
    assert.deepEqual(
      left.map((w) => w.url),
      [`${receiverUrl}?seed`],
    );
  });

  it("the operator's reset link lets the user choose a new password, and signs out the old sessions", async () => {
    const page = operatorPage;
    await page.goto(`${server.url}/admin`);
    await page.getByRole('button', { name: `Password-reset link for ${USER.email}` }).click();
    const url = (await page.getByTestId('reset-link-url').textContent())!.trim();
    assert.match(url, /\/reset-password\?token=acct_/);
    assert.deepEqual(await axeViolations(page), []);

    const visitor = await newPage();
    await visitor.emulateMedia({ colorScheme: 'dark' });
    const link = new URL(url); // on PUBLIC_URL, which the test server does not set
    await visitor.goto(`${server.url}${link.pathname}${link.search}`);
    await visitor.getByLabel(/New password/).fill('a-brand-new-password');
    await visitor.screenshot({ path: path.join(SCREENSHOTS, 'reset-password-filled-desktop-dark.png') });
    await visitor.getByRole('button', { name: 'Set the new password' }).click();
    await visitor.getByTestId('who').filter({ hasText: USER.email }).waitFor();
    await visitor.context().close();

    // The user's old session ended: the next request sends them to log in.
    await userPage.goto(`${server.url}/files`);
    await userPage.waitForURL(/\/login\?next=%2Ffiles$/);
    await logIn(userPage, { email: USER.email, password: 'a-brand-new-password' });
  });

  it('no script errors on any page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
