// A file's page in a real browser (Debian's Chromium, driven by playwright-core): reached from
// the Files list, it shows the preview and the file's info; "Find faces" puts `?faces=1` in the
// address, info is asked for the faces, and a box per face is drawn over the preview exactly
// where the API's pixel boxes fall on the image as displayed (at a desktop's width and at a
// phone's, where the image is shown smaller). The page passes axe (light and dark) and fits a 390 px phone, with no
// page error. SQLite is enough: info's own tests run on every dialect. Screenshots:
// test-output/screenshots/file-info/.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { Client, REPO_ROOT, startServer, type TestServer } from '../helpers.js';
import { axeViolations, launchChromium } from './browser.js';

/** Three faces, labelled in test/fixtures/faces.json (the face detector's own sample photo). */
const PHOTO = path.join(REPO_ROOT, 'node_modules/@vladmandic/face-api/demo/sample1.jpg');
const SCREENSHOTS = path.join(REPO_ROOT, 'test-output', 'screenshots', 'file-info');
const USER = { email: 'faces@example.com', password: 'faces-password-1' };
const SIZES = [
  { width: 1280, height: 860 },
  { width: 390, height: 844 },
];
/** A box may be off by rounding (CSS percentages to device pixels): a pixel and a half. */
const TOLERANCE = 1.5;

interface Box {
  left: number;
  top: number;
  width: number;
  height: number;
}

describe("a file's page in a real browser: info, and the faces' boxes over the preview", { timeout: 240_000 }, () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  let fileId: string;
  let apiInfo: { width: number; height: number; faces: Box[] };
  const pageErrors: string[] = [];

  before(async () => {
    assert.ok(fs.existsSync(path.join(REPO_ROOT, 'web', 'dist', 'index.html')), 'web/dist is missing: run scripts/setup.mjs --test');
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    server = await startServer({ dialect: 'sqlite', workers: 0 });
    const { database, clock } = server.services;
    const account = await createAccount(database, clock, { ...USER, plan: 'pro' });
    const client = new Client(server.url, (await createApiKey(database, clock, account.id, 'seed')).key);
    fileId = await client.uploadOk(PHOTO, 'group.jpg');
    const info = await client.get(`/api/files/${fileId}/info?faces=1`);
    assert.equal(info.status, 200, JSON.stringify(info.body));
    apiInfo = info.body.data;
    assert.ok(apiInfo.faces.length >= 2, `faces in the photo: ${JSON.stringify(apiInfo.faces)}`);

    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: SIZES[0] })).newPage();
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

  /**
   * Each face's box on screen against the API's box scaled to the image as displayed. The image
   * and its boxes are measured in one go, once the image has loaded: measured apart, anything
   * above it that finishes loading in between moves it.
   */
  async function boxesOffBy(): Promise<{ misplaced: string[]; shown: number; image: { width: number; height: number } }> {
    const { image, boxes } = await page.getByTestId('file-preview').evaluate(async (img: HTMLImageElement) => {
      if (!img.complete) await new Promise((resolve) => img.addEventListener('load', resolve, { once: true }));
      const image = img.getBoundingClientRect();
      const boxes = [...document.querySelectorAll('[data-testid=face-box]')].map((node) => {
        const rect = node.getBoundingClientRect();
        return { left: rect.left - image.left, top: rect.top - image.top, width: rect.width, height: rect.height };
      });
      return { image: { width: image.width, height: image.height }, boxes };
    });
    const sx = image.width / apiInfo.width;
    const sy = image.height / apiInfo.height;
    const misplaced: string[] = [];
    apiInfo.faces.forEach((face, i) => {
      const box = boxes[i];
      const want = { left: face.left * sx, top: face.top * sy, width: face.width * sx, height: face.height * sy };
      const off = box ? Math.max(...(['left', 'top', 'width', 'height'] as const).map((k) => Math.abs(box[k] - want[k]))) : Infinity;
      if (off > TOLERANCE) misplaced.push(`face ${i}: shown ${JSON.stringify(box)}, expected ${JSON.stringify(want)} (from the image's corner)`);
    });
    return { misplaced, shown: boxes.length, image };
  }

  it('is reached from the Files list and shows the info without faces until they are asked for', async () => {
    await page.getByRole('link', { name: 'Files', exact: true }).click();
    await page.getByRole('link', { name: 'group.jpg' }).click();
    await page.waitForURL(`${server.url}/files/${fileId}`);
    await page.getByRole('heading', { name: 'group.jpg' }).waitFor();
    await page.getByText(`jpeg · ${apiInfo.width}×${apiInfo.height}`).waitFor();
    await page.waitForFunction(() => (document.querySelector<HTMLImageElement>('[data-testid=file-preview]')?.naturalWidth ?? 0) > 0);
    assert.equal(await page.getByTestId('face-box').count(), 0);
  });

  it("draws a box per face where the API's pixel boxes fall on the displayed image, at a desktop's width and a phone's", async () => {
    await page.getByRole('button', { name: 'Find faces' }).click();
    await page.waitForURL(`${server.url}/files/${fileId}?faces=1`);
    await page.getByText(`${apiInfo.faces.length} faces found.`).waitFor();
    for (const size of SIZES) {
      await page.setViewportSize(size);
      await page.waitForFunction(() => document.querySelector('[data-testid=face-box]') !== null);
      const { misplaced, shown, image } = await boxesOffBy();
      assert.equal(shown, apiInfo.faces.length, `at ${size.width} px`);
      assert.deepEqual(misplaced, [], `at ${size.width} px, the image shown ${image.width} × ${image.height}`);
      // The phone shows the image smaller than its pixels: the boxes are scaled, not copied.
      if (size.width < 500) assert.ok(image.width < apiInfo.width, `shown ${image.width} px wide of ${apiInfo.width}`);
      const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
      const wide = await page.evaluate(() =>
        [...document.querySelectorAll('main *')]
          .filter((e) => e.getBoundingClientRect().right > window.innerWidth)
          .slice(-6)
          .map((e) => `${e.tagName}.${e.className} ${Math.round(e.getBoundingClientRect().right)} ${e.textContent?.slice(0, 40)}`),
      );
      assert.ok(widths.scroll <= widths.inner, `${widths.scroll} px wide at ${size.width}: ${wide.join(' | ')}`);
      for (const colorScheme of ['light', 'dark'] as const) {
        await page.emulateMedia({ colorScheme });
        assert.deepEqual(await axeViolations(page), [], `at ${size.width} px, ${colorScheme}`);
        await page.screenshot({ path: path.join(SCREENSHOTS, `faces-${size.width}-${colorScheme}.png`), fullPage: true });
      }
      await page.emulateMedia({ colorScheme: 'light' });
    }
    await page.setViewportSize(SIZES[0]!);
  });

  it('a link with ?faces=1 opens with the boxes; "Hide faces" removes them and the query', async () => {
    await page.goto(`${server.url}/files/${fileId}?faces=1`);
    await page.getByText(`${apiInfo.faces.length} faces found.`).waitFor();
    await page.waitForFunction(() => (document.querySelector<HTMLImageElement>('[data-testid=file-preview]')?.naturalWidth ?? 0) > 0);
    assert.deepEqual((await boxesOffBy()).misplaced, []);
    await page.getByRole('button', { name: 'Hide faces' }).click();
    await page.waitForURL(`${server.url}/files/${fileId}`);
    await page.getByRole('button', { name: 'Find faces' }).waitFor();
    assert.equal(await page.getByTestId('face-box').count(), 0);
    assert.deepEqual(pageErrors, []);
  });
});
