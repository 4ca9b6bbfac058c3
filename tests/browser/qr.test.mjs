// The share link's QR code (docs/sharing.md, "A QR code of the link") in headless Chromium against
// the real binary: the code drawn on each page that shares a link reads back, with a QR decoder
// (jsqr, npm test tooling), as the whole link, an encrypted paste's #key included; without
// JavaScript the page shows the link alone; axe finds nothing on the pages with a code.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { startSluice, launchBrowser, repoRoot } from './harness.mjs';

const require = createRequire(import.meta.url);
const jsQR = require(join(repoRoot, 'node_modules', 'jsqr'));
const AXE = readFileSync(join(repoRoot, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

let server;
let chrome;

before(async () => {
  [server, chrome] = await Promise.all([startSluice(), launchBrowser()]);
});

after(async () => {
  if (chrome) await chrome.close();
  if (server) await server.stop();
});

async function newPage(options = {}) {
  const context = await chrome.browser.newContext(options);
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // A script refused (integrity, CSP) or not found never throws in the page: it is only said.
  page.on('console', (m) => {
    if (m.type() === 'error' && /integrity|Content Security Policy/.test(m.text())) errors.push(m.text());
  });
  page.on('response', (r) => {
    if (r.url().includes('/static/') && r.status() >= 400) errors.push(`${r.status()} ${r.url()}`);
  });
  page.errors = errors;
  return page;
}

// Creates a paste from the create page's form, as a person would; `setup` ticks its options.
async function createFromForm(page, text, setup = async () => {}) {
  await page.goto(server.url + '/');
  await page.fill('textarea[name=content]', text);
  await setup(page);
  await page.click('button[type=submit]');
  await page.waitForSelector('#created');
}

// What the QR code next to the share link says, read from the canvas's pixels as a phone's
// camera would read them from the screen.
async function decodeQr(page) {
  const canvas = page.locator('#share-link-qr');
  await canvas.waitFor();
  const image = await canvas.evaluate((c) => {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    return { width: c.width, height: c.height, data: Array.from(data) };
  });
  const code = jsQR(Uint8ClampedArray.from(image.data), image.width, image.height);
  assert.ok(code, 'the canvas holds a QR code a decoder reads');
  return code.data;
}

test('the created page draws the share link as a QR code that reads back as the link', async () => {
  const page = await newPage();
  await createFromForm(page, 'hello from a phone\n');
  const link = await page.inputValue('#share-link');
  assert.match(link, /^http:\/\/127\.0\.0\.1:\d+\/[0-9A-Za-z]{12}$/);
  assert.equal(await decodeQr(page), link);
  assert.equal(await page.getAttribute('#share-link-qr', 'role'), 'img');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a burn-after-reading paste\'s created page has the code too', async () => {
  const page = await newPage();
  await createFromForm(page, 'once only\n', (p) => p.check('#burn'));
  const link = await page.inputValue('#share-link');
  assert.equal(await decodeQr(page), link);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('an encrypted paste\'s code holds the key, which never reaches the server', async () => {
  const page = await newPage();
  const requests = [];
  page.on('request', (r) => requests.push(r.url() + ' ' + (r.postData() || '')));
  await createFromForm(page, 'a secret\n', (p) => p.check('#encrypt'));
  const link = await page.inputValue('#share-link');
  const key = link.split('#')[1];
  assert.ok(key && key.length >= 40, `the link carries its key: ${link}`);
  assert.equal(await decodeQr(page), link);
  for (const r of requests) assert.ok(!r.includes(key), `a request carried the key: ${r}`);
  assert.ok(!server.log().includes(key), 'the server logged the key');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('without JavaScript the created page shows the link and no code', async () => {
  const page = await newPage({ javaScriptEnabled: false });
  await createFromForm(page, 'no scripts here\n');
  assert.match(await page.inputValue('#share-link'), /^http:\/\/127\.0\.0\.1:\d+\//);
  assert.equal(await page.locator('#share-link-qr').count(), 0);
  await page.context().close();
});

test('axe finds nothing on a created page with its code, light and dark', async () => {
  const page = await newPage();
  await createFromForm(page, 'accessible\n');
  await page.locator('#share-link-qr').waitFor();
  const found = [];
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE);
    const result = await page.evaluate(async () =>
      (await window.axe.run(document, { resultTypes: ['violations'] })).violations.map(
        (v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
      ),
    );
    found.push(...result.map((v) => `${colorScheme}: ${v}`));
  }
  assert.deepEqual(found, []);
  await page.context().close();
});
