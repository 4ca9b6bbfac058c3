// The web UI in headless Chromium against the real binary: create from the form, highlighted view,
// copy, raw and delete links, dark mode, the 429 page and the live /status page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startSluice, launchBrowser, screenshotDir } from './harness.mjs';

const SAMPLE = `#!/usr/bin/env python3
"""Count words on stdin."""
import sys
from collections import Counter


def top_words(text, n=5):
    # Lower-case first: "The" and "the" are one word.
    words = [w.strip('.,;:!?"') for w in text.lower().split()]
    return Counter(w for w in words if w).most_common(n)


if __name__ == "__main__":
    for word, count in top_words(sys.stdin.read()):
        print(f"{count:6d}  {word}")
`;

let server;
let chrome;

before(async () => {
  server = await startSluice();
  chrome = await launchBrowser();
});

after(async () => {
  if (chrome) await chrome.close();
  if (server) await server.stop();
});

async function createFromForm(page, text, { lang = 'auto', viaKeyboard = true } = {}) {
  await page.goto(server.url + '/');
  await page.fill('textarea[name=content]', text);
  await page.selectOption('select[name=lang]', lang);
  const navigation = page.waitForNavigation();
  if (viaKeyboard) {
    await page.focus('textarea[name=content]');
    await page.keyboard.press('Control+Enter');
  } else {
    await page.click('button[type=submit]');
  }
  return navigation;
}

test('create from the form with Ctrl+Enter, see it highlighted, copy and raw work', async () => {
  const context = await chrome.browser.newContext({ colorScheme: 'light', viewport: { width: 1100, height: 760 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
  const page = await context.newPage();
  await page.goto(server.url + '/');
  await page.fill('textarea[name=content]', SAMPLE);
  await page.screenshot({ path: join(screenshotDir, 'create.png') });

  const response = await createFromForm(page, SAMPLE);
  assert.equal(response.status(), 201);
  assert.match(response.headers()['x-sluice-rung'], /^highlighted/);
  assert.ok(await page.locator('#created').isVisible());
  assert.ok((await page.locator('pre.code .hl-keyword').count()) > 3, 'keywords are highlighted');
  assert.equal(await page.locator('pre.code .l').count(), SAMPLE.split('\n').length - 1);
  const link = await page.inputValue('#share-link');
  assert.match(link, /^http:\/\/127\.0\.0\.1:\d+\/[0-9A-Za-z]{12}$/);
  await page.screenshot({ path: join(screenshotDir, 'created.png') });

  await page.click('text=Copy link');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), link);

  // The paste page itself, as anyone with the link sees it.
  const view = await page.goto(link);
  assert.equal(view.status(), 200);
  assert.match(view.headers()['x-sluice-rung'], /^(highlighted|cached)/);
  assert.ok(await page.locator('#created').count() === 0, 'the delete link is shown only once');
  await page.click('#copy');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), SAMPLE.replace(/\n$/, '') + '\n');
  await page.screenshot({ path: join(screenshotDir, 'paste-light.png') });

  const raw = await Promise.all([page.waitForNavigation(), page.click('#raw')]);
  assert.equal(raw[0].headers()['content-type'], 'text/plain; charset=utf-8');
  assert.equal(await raw[0].text(), SAMPLE);
  await context.close();
});

test('the delete link, shown once, deletes the paste', async () => {
  const page = await chrome.browser.newPage();
  await createFromForm(page, 'delete me\n', { lang: 'text', viaKeyboard: false });
  const link = await page.inputValue('#share-link');
  const deleteLink = await page.inputValue('#delete-link');
  assert.match(deleteLink, /\/delete\/[0-9A-Za-z]{12}\?token=/);
  await page.goto(deleteLink);
  // Opening the link only asks; the button deletes.
  assert.equal((await page.request.get(link)).status(), 200);
  const done = await Promise.all([page.waitForNavigation(), page.click('#confirm-delete')]);
  assert.equal(done[0].status(), 200);
  assert.ok(await page.locator('#deleted').isVisible());
  const gone = await page.goto(link);
  assert.equal(gone.status(), 404);
  assert.match(await page.textContent('h1'), /No such paste/);
  await page.close();
});

test('burn after reading: the link asks first, the button shows the text once', async () => {
  const page = await chrome.browser.newPage();
  await page.goto(server.url + '/');
  await page.fill('textarea[name=content]', 'burn me <b>\n');
  await page.check('#burn');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  const link = await page.inputValue('#share-link');
  // A chat's link preview (a plain GET) burns nothing.
  assert.equal((await page.request.get(link, { headers: { Accept: 'text/html' } })).status(), 200);
  const asked = await page.goto(link);
  assert.equal(asked.status(), 200);
  assert.match(await page.textContent('#burn-warning'), /will be deleted when you open it/);
  const shown = await Promise.all([page.waitForNavigation(), page.click('#confirm-burn')]);
  assert.equal(shown[0].status(), 200);
  assert.match(await page.textContent('#code'), /burn me <b>/);
  assert.equal((await page.goto(link)).status(), 404);
  await page.close();
});

test('dark mode follows the browser preference', async () => {
  const context = await chrome.browser.newContext({ colorScheme: 'dark', viewport: { width: 1100, height: 760 } });
  const page = await context.newPage();
  await createFromForm(page, SAMPLE);
  const link = await page.inputValue('#share-link');
  await page.goto(link);
  const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(background, 'rgb(13, 17, 23)');
  const keyword = await page.evaluate(
    () => getComputedStyle(document.querySelector('.hl-keyword')).color);
  assert.equal(keyword, 'rgb(255, 123, 114)');
  await page.screenshot({ path: join(screenshotDir, 'paste-dark.png') });
  await context.close();
});

test('readable on a phone', async () => {
  const context = await chrome.browser.newContext({ viewport: { width: 390, height: 760 }, isMobile: true });
  const page = await context.newPage();
  await createFromForm(page, SAMPLE, { viaKeyboard: false });
  const link = await page.inputValue('#share-link');
  await page.goto(link);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `no sideways scrolling (overflow ${overflow}px)`);
  await page.screenshot({ path: join(screenshotDir, 'paste-phone.png') });
  await context.close();
});

test('without JavaScript a paste is created and read, and hostile text stays text', async () => {
  const context = await chrome.browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  let dialogs = 0;
  page.on('dialog', (d) => { dialogs += 1; d.dismiss(); });
  const hostile = '</pre><script>alert(1)</script>\n"><img src=x onerror=alert(2)>\n<b>bold</b> & more\n';
  const created = await createFromForm(page, hostile, { lang: 'html', viaKeyboard: false });
  assert.equal(created.status(), 201);
  const link = await page.inputValue('#share-link');
  await page.goto(link);
  assert.equal(await page.locator('pre.code img, pre.code script, pre.code b').count(), 0);
  assert.equal(await page.textContent('pre.code'), hostile);
  assert.equal(await page.locator('#copy').isVisible(), false, 'script-only buttons stay hidden');
  assert.equal(dialogs, 0);
  await context.close();
});

test('/status shows live numbers changing under load', async () => {
  // A small highlighter (one slot, 50 ms a render, no cache) and a tight create limit, so the load
  // below shows sheds and 429s as well as traffic.
  const busy = await startSluice(['--fault-injection', 'true', '--render-delay', '50ms',
    '--highlight-slots', '1', '--highlight-cache-bytes', '0', '--ip-create-rate', '1',
    '--ip-create-burst', '2', '--ip-read-rate', '10000', '--ip-read-burst', '10000'],
  { relaxed: false });
  try {
    const page = await chrome.browser.newPage({ viewport: { width: 1100, height: 900 } });
    const status = await page.goto(busy.url + '/status');
    assert.match(status.headers()['content-security-policy'], /script-src 'self'/);
    await page.waitForSelector('#card-status [data-series]', { timeout: 10000 });
    const legend = (card, series) => page.evaluate(([c, s]) => {
      const el = document.querySelector(`#card-${c} [data-series="${s}"]`);
      return el ? parseFloat(el.getAttribute('data-value')) : 0;
    }, [card, series]);
    const api = page.request;
    const created = await api.post(busy.url + '/api/v1/pastes', { data: SAMPLE });
    const { url } = await created.json();
    const seen = { ok: 0, shed: 0, limited: 0 };
    const stopAt = Date.now() + 6000;
    while (Date.now() < stopAt) {
      await Promise.all([
        ...Array.from({ length: 12 },
          () => api.get(url + '?lang=python', { headers: { Accept: 'text/html' } })),
        api.post(busy.url + '/api/v1/pastes', { data: 'more\n' }),
      ]);
      seen.ok = Math.max(seen.ok, await legend('status', '200'));
      seen.shed = Math.max(seen.shed, await legend('sheds', 'view_shed_for_load'));
      seen.limited = Math.max(seen.limited, await legend('sheds', 'ip_create_count'));
    }
    assert.ok(seen.ok > 5, `200s per second moved: ${JSON.stringify(seen)}`);
    assert.ok(seen.shed > 0, `view sheds per second moved: ${JSON.stringify(seen)}`);
    assert.ok(seen.limited > 0, `429s per second moved: ${JSON.stringify(seen)}`);
    const highlightLimit = await page.textContent('#card-pools [data-series="highlight"] td:nth-child(3)');
    assert.equal(highlightLimit, '1', 'the table shows the same pool as /metrics');
    assert.match(await page.textContent('#card-pools [data-series="highlight"]'), /^highlighter slots/);
    await page.screenshot({ path: join(screenshotDir, 'status.png'), fullPage: true });
    await page.close();
  } finally {
    await busy.stop();
  }
});

test('a 429 page says it is a limit and when to retry', async () => {
  const strict = await startSluice(['--ip-create-rate', '0.01', '--ip-create-burst', '1'], { relaxed: false });
  try {
    const page = await chrome.browser.newPage({ viewport: { width: 1100, height: 700 } });
    await page.goto(strict.url + '/');
    await page.fill('textarea[name=content]', 'one\n');
    const first = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    assert.equal(first[0].status(), 201);
    await page.goto(strict.url + '/');
    await page.fill('textarea[name=content]', 'two\n');
    const second = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    assert.equal(second[0].status(), 429);
    assert.ok(Number(second[0].headers()['retry-after']) > 0);
    assert.match(second[0].headers()['content-type'], /^text\/html/);
    assert.match(await page.textContent('h1'), /too quickly/);
    assert.match(await page.textContent('#retry'), /Try again in \d+ (second|minute)/);
    assert.match(await page.textContent('#problem'), /rate limit/);
    await page.screenshot({ path: join(screenshotDir, 'error-429.png') });
    await page.close();
  } finally {
    await strict.stop();
  }
});
