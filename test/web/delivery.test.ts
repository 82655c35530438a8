// The dashboard's Delivery page in a real browser (Debian's Chromium, driven by playwright-core):
// a Pro user creates a signing key (its secret shown once), a preset (then edits it) and an
// origin, builds a URL in the URL builder for an uploaded file, sees the image load at the width
// asked, copies the URL (the clipboard holds it, and it renders 200 when fetched), and deletes the
// key (the URL is refused at once). The page passes axe and fits a 390 px phone, light and dark,
// before and after, with no CSP violation and no page error. Screenshots: test-output/screenshots/delivery/.
// SQLite is enough here: the SDK's delivery tests run the /r/ route on every dialect.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { Client, REPO_ROOT, corpusFile, startServer, type TestServer } from '../helpers.js';
import { axeViolations, launchChromium } from './browser.js';

const JPEG = corpusFile('images/sharp/320x240.jpg');
const SCREENSHOTS = path.join(REPO_ROOT, 'test-output', 'screenshots', 'delivery');
const USER = { email: 'delivery@example.com', password: 'delivery-password-1' };
const SIZES = [
  { width: 1280, height: 860 },
  { width: 390, height: 844 },
];

describe('the Delivery page in a real browser', { timeout: 240_000 }, () => {
  let server: TestServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let fileId: string;
  const cspViolations: string[] = [];
  const pageErrors: string[] = [];

  /** axe and the phone's width, on the page as it is now, at each size. */
  async function checkPage(when: string): Promise<string[]> {
    const problems: string[] = [];
    for (const colorScheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme });
      for (const size of SIZES) {
        const where = `${when} at ${size.width} px, ${colorScheme}`;
        await page.setViewportSize(size);
        const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
        if (widths.scroll > widths.inner) problems.push(`${where}: ${widths.scroll} px wide`);
        for (const violation of await axeViolations(page)) problems.push(`${where}: ${violation}`);
        await page.screenshot({ path: path.join(SCREENSHOTS, `${where.replace(/[ ,]+/g, '-')}.png`), fullPage: true });
      }
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize(SIZES[0]!);
    return problems;
  }

  before(async () => {
    assert.ok(fs.existsSync(path.join(REPO_ROOT, 'web', 'dist', 'index.html')), 'web/dist is missing: run scripts/setup.mjs --test');
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    // The origin below is on loopback; creating it only checks its address.
    server = await startServer({ dialect: 'sqlite', workers: 0, env: { ORIGIN_ALLOW_PRIVATE_NETWORKS: '1' } });
    const { database, clock } = server.services;
    const account = await createAccount(database, clock, { ...USER, plan: 'pro' });
    const client = new Client(server.url, (await createApiKey(database, clock, account.id, 'seed')).key);
    fileId = await client.uploadOk(JPEG, 'harbour.jpg');

    browser = await launchChromium();
    context = await browser.newContext({ viewport: SIZES[0] });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    page = await context.newPage();
    page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await page.goto(`${server.url}/login`);
    await page.getByLabel('Email').fill(USER.email);
    await page.getByLabel('Password').fill(USER.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByTestId('plan-badge').waitFor();
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it('keys, presets and origins: created, listed, edited and deleted; the secret shown once', async () => {
    await page.getByRole('link', { name: 'Delivery', exact: true }).click();
    await page.getByRole('heading', { name: 'Delivery', level: 1 }).waitFor();
    await page.getByText('No signing keys yet.').waitFor();
    assert.deepEqual(await checkPage('empty'), []);

    await page.getByRole('button', { name: 'Create signing key' }).click();
    const secret = (await page.getByTestId('new-signing-key-secret').textContent())!.trim();
    assert.match(secret, /^[A-Za-z0-9_-]{43}$/);
    await page.getByTestId('signing-keys-table').locator('tbody tr').first().waitFor();

    const presetForm = page.getByRole('form', { name: 'New preset' });
    await presetForm.getByLabel('Name').fill('card');
    await presetForm.getByLabel('Transform').fill('w:64,f:png');
    await presetForm.getByLabel('Public (usable unsigned)').check();
    await presetForm.getByRole('button', { name: 'Add preset' }).click();
    const presetRow = page.getByTestId('presets-table').locator('[data-preset=card]');
    await presetRow.getByText('w:64,f:png').waitFor();
    await presetRow.getByRole('button', { name: 'Edit preset card' }).click();
    const editForm = page.getByRole('form', { name: 'Edit preset card' });
    await editForm.getByLabel('Transform').fill('w:80,f:webp');
    await editForm.getByRole('button', { name: 'Save preset' }).click();
    await presetRow.getByText('w:80,f:webp').waitFor();
    // A transform the server refuses says which pair.
    await presetForm.getByLabel('Name').fill('broken');
    await presetForm.getByLabel('Transform').fill('w:0');
    await presetForm.getByRole('button', { name: 'Add preset' }).click();
    await page.getByRole('alert').filter({ hasText: 'VALIDATION_ERROR' }).waitFor();

    const originForm = page.getByRole('form', { name: 'New origin' });
    await originForm.getByLabel('Name').fill('shop');
    await originForm.getByLabel('Base URL').fill('http://127.0.0.1:9/images');
    await originForm.getByRole('button', { name: 'Add origin' }).click();
    await page.getByTestId('origins-table').locator('[data-origin=shop]').waitFor();
    await page.getByRole('heading', { name: /Origins \(1 of 5\)/ }).waitFor();
    await page.getByRole('button', { name: 'Delete origin shop' }).click();
    await page.getByTestId('confirm-dialog').getByRole('button', { name: 'Delete origin' }).click();
    await page.getByText('No origins yet.').waitFor();
  });

  it('the URL builder signs a URL, shows the image at the width asked, and copies the URL; deleting the key stops it', async () => {
    const builder = page.getByTestId('url-builder');
    assert.equal(await builder.locator('select[name=fileId]').inputValue(), fileId);
    // The secret of the key just made is already there (in memory only).
    assert.match(await builder.getByLabel(/^Secret/).inputValue(), /^[A-Za-z0-9_-]{43}$/);
    // A mistake is explained before anything is signed.
    await builder.getByLabel('Width (w)').fill('5000');
    await builder.getByRole('button', { name: 'Build URL' }).click();
    await builder.getByRole('alert').filter({ hasText: 'w:5000' }).waitFor();

    await builder.getByLabel('Width (w)').fill('100');
    await builder.getByLabel('Pixel ratio (dpr)').selectOption('2');
    await builder.getByLabel('Format (f)').selectOption('png');
    await builder.getByRole('button', { name: 'Build URL' }).click();
    const url = (await page.getByTestId('built-url-value').textContent())!.trim();
    assert.match(url, new RegExp(`^${server.url}/r/sk_[A-Za-z0-9_-]+/[A-Za-z0-9_-]{43}/w:100,dpr:2,f:png/${fileId}$`));
    // The image beside it loads, 100 px at dpr 2.
    const image = page.getByTestId('built-image');
    await page.waitForFunction(() => {
      const img = document.querySelector<HTMLImageElement>('[data-testid=built-image]');
      return img?.complete && img.naturalWidth > 0;
    });
    assert.equal(await image.evaluate((img: HTMLImageElement) => img.naturalWidth), 200);
    await builder.getByText('Rendered 200 × 150 px (asked for 200 px wide).').waitFor();

    await builder.getByRole('button', { name: 'Copy URL' }).click();
    await builder.getByRole('button', { name: 'Copied' }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), url);
    const fetched = await fetch(url);
    assert.equal(fetched.status, 200);
    assert.equal(fetched.headers.get('content-type'), 'image/png');
    await fetched.arrayBuffer();

    assert.deepEqual(await checkPage('with a built URL'), []);

    // A public preset alone: unsigned when no secret is at hand.
    await builder.getByLabel('Width (w)').fill('');
    await builder.getByLabel('Pixel ratio (dpr)').selectOption('');
    await builder.getByLabel('Format (f)').selectOption('');
    await builder.getByLabel('Preset').selectOption('card');
    await builder.getByLabel(/^Secret/).fill('');
    await builder.getByRole('button', { name: 'Build URL' }).click();
    await page
      .getByTestId('built-url-value')
      .filter({ hasText: `/_/p:card/${fileId}` })
      .waitFor();
    await builder.getByText('Rendered 80 × 60 px.').waitFor();

    await page.getByRole('button', { name: /^Delete signing key/ }).click();
    await page.getByTestId('confirm-dialog').getByRole('button', { name: 'Delete key' }).click();
    await page.getByText('No signing keys yet.').waitFor();
    const refused = await fetch(url);
    assert.equal(refused.status, 403);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'SIGNATURE_INVALID');

    assert.deepEqual(cspViolations, []);
    assert.deepEqual(pageErrors, []);
  });
});
