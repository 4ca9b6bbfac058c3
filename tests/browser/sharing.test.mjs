// Sharing in headless Chromium against the real binary (docs/sharing.md): a line link scrolls and
// marks, shift-click makes a range link, copying never copies the numbers; a fork starts
// prefilled, is created, says "forked from" and its diff is right; hostile Markdown renders safe;
// axe-core finds nothing on the new pages, light and dark.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSluice, launchBrowser, repoRoot } from './harness.mjs';

const AXE = readFileSync(join(repoRoot, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
const LINES = Array.from({ length: 120 }, (_, i) => `line ${i + 1}: some text`).join('\n') + '\n';

let server;
let chrome;

before(async () => {
  [server, chrome] = await Promise.all([startSluice(), launchBrowser()]);
});

after(async () => {
  if (chrome) await chrome.close();
  if (server) await server.stop();
});

async function create(text, query = '') {
  const res = await fetch(`${server.url}/api/v1/pastes${query}`, { method: 'POST', body: text });
  assert.equal(res.status, 201);
  return res.json();
}

async function violations(page, name) {
  const found = [];
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    if (!await page.evaluate(() => 'axe' in window)) await page.evaluate(AXE);
    const result = await page.evaluate(async () => (await window.axe.run(document,
      { resultTypes: ['violations'] })).violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`));
    found.push(...result.map((v) => `${name} (${colorScheme}): ${v}`));
  }
  return found;
}

test('a line link marks its line; shift-click makes a range; numbers are never copied', async () => {
  const doc = await create(LINES);
  const context = await chrome.browser.newContext({ viewport: { width: 1000, height: 600 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
  const page = await context.newPage();
  await page.goto(`${server.url}/${doc.id}#L80`);
  const marked = page.locator('#L80');
  assert.ok(await marked.evaluate((el) => el.classList.contains('sel')), 'line 80 is marked');
  const box = await marked.boundingBox();
  assert.ok(box.y >= 0 && box.y < 600, `line 80 is scrolled into view (y=${box.y})`);

  // The page's own address: page.url() learns of a replaceState only from a later event.
  const here = () => page.evaluate(() => location.href);
  // A click in the gutter (the number) of line 10, then shift-click on line 14.
  const gutter = async (n) => {
    const b = await page.locator(`#L${n}`).boundingBox();
    // The middle of the gutter, whatever width the numbers' font gives it.
    const gutterWidth = await page.locator('#code').evaluate((el) => parseFloat(getComputedStyle(el).paddingLeft));
    const code = await page.locator('#code').boundingBox();
    return { x: code.x + gutterWidth / 2, y: b.y + b.height / 2 };
  };
  await page.locator('#L10').scrollIntoViewIfNeeded();
  let at = await gutter(10);
  await page.mouse.click(at.x, at.y);
  assert.match(await here(), /#L10$/);
  at = await gutter(14);
  await page.keyboard.down('Shift');
  await page.mouse.click(at.x, at.y);
  await page.keyboard.up('Shift');
  assert.match(await here(), /#L10-L14$/);
  assert.equal(await page.locator('#code .l.sel').count(), 5);

  // A range link opened afresh marks the range.
  await page.goto(`${server.url}/${doc.id}#L3-L5`);
  assert.deepEqual(await page.locator('#code .l.sel').evaluateAll((els) => els.map((e) => e.id)),
    ['L3', 'L4', 'L5']);
  // Selecting lines and copying gives the text alone.
  const selected = await page.evaluate(() => {
    const range = document.createRange();
    range.setStartBefore(document.getElementById('L1'));
    range.setEndAfter(document.getElementById('L3'));
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    return sel.toString();
  });
  assert.equal(selected.trimEnd(), 'line 1: some text\nline 2: some text\nline 3: some text');
  await context.close();
});

test('a fork starts prefilled, says where it came from, and its diff is right', async () => {
  const parent = await create('alpha\nbeta\ngamma\n');
  const page = await chrome.browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${server.url}/${parent.id}`);
  await Promise.all([page.waitForNavigation(), page.click('#fork')]);
  assert.equal(await page.inputValue('textarea[name=content]'), 'alpha\nbeta\ngamma\n');
  const found = await violations(page, 'fork form');
  await page.fill('textarea[name=content]', 'alpha\nBETA\ngamma\n');
  const [created] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  assert.equal(created.status(), 201);
  assert.match(await page.textContent('#forked-from'), new RegExp(`Forked from ${parent.id}`));
  await Promise.all([page.waitForNavigation(), page.click('#diff')]);
  const diff = await page.textContent('#code');
  assert.match(diff, /-beta\n\+BETA\n/);
  found.push(...await violations(page, 'diff'));
  assert.deepEqual(found, []);
  assert.deepEqual(errors, []);
  await page.close();
});

test('hostile Markdown renders safe and bounded; axe finds nothing', async () => {
  const hostile = '# Hi <script>window.pwned = 1</script>\n\n<img src=x onerror="window.pwned = 2">\n\n' +
    '[x](javascript:window.pwned=3) ![t](https://tracker.example/p.gif) &amp; &lt;b&gt;\n\n' +
    '| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done\n- [ ] todo\n\n' + '- '.repeat(10000) + 'deep\n';
  const doc = await create(hostile, '?lang=markdown');
  const page = await chrome.browser.newPage();
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  const started = Date.now();
  const res = await page.goto(`${server.url}/${doc.id}/rendered`);
  assert.equal(res.status(), 200);
  assert.ok(Date.now() - started < 10000, 'rendered within the render timeout and a grace');
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.equal(await page.locator('article script, article img, article iframe').count(), 0);
  assert.equal(await page.locator('article a[href^="javascript"]').count(), 0);
  assert.ok(requests.every((u) => u.startsWith(server.url)), `only this origin: ${requests}`);
  assert.equal(await page.locator('article table td').count(), 2);
  // axe on a page without the 10,000-deep list (its nesting is not the page's design).
  const tame = await create(hostile.slice(0, hostile.indexOf('- - ')), '?lang=markdown');
  await page.goto(`${server.url}/${tame.id}/rendered`);
  const found = await violations(page, 'rendered markdown');
  await page.goto(`${server.url}/${tame.id}?lang=markdown`);
  found.push(...await violations(page, 'markdown source'));
  const counted = await create('five\n', '?max_views=5');
  await page.goto(`${server.url}/${counted.id}`);
  found.push(...await violations(page, 'limited views confirmation'));
  assert.deepEqual(found, []);
  await page.close();
});
