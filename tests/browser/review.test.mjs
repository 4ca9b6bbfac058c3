// The review page on the admin listener (docs/moderation.md, "The review page") in Chromium: sign
// in with the admin token, see a reported paste in the queue with its clock, take it down with
// the row's button (a plain form, no script), and the public read then answers 451. axe finds no
// violation on the sign-in page, the queue and a paste's page, at a desktop and a phone viewport.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSluice, launchBrowser, repoRoot } from './harness.mjs';

const AXE = readFileSync(join(repoRoot, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
const TOKEN = 'browser-admin-token-0123456789';
const PHONE = { width: 360, height: 740 };

let server;
let chrome;
let dir;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sluice-review-'));
  const tokenFile = join(dir, 'admin.token');
  writeFileSync(tokenFile, TOKEN + '\n');
  // One report withholds a paste (from another network than the creator's, through the trusted
  // loopback balancer), so the queue shows a withheld entry with its Restore button.
  [server, chrome] = await Promise.all([
    startSluice(['--admin-token-file', tokenFile, '--report-hide-threshold', '1',
                 '--trusted-proxy', '127.0.0.1']),
    launchBrowser(),
  ]);
  assert.ok(server.adminUrl, 'the admin listener is up');
});

after(async () => {
  if (chrome) await chrome.close();
  if (server) await server.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function reportedPaste(text, reporter) {
  const created = await fetch(server.url + '/api/v1/pastes', { method: 'POST', body: text });
  assert.equal(created.status, 201);
  const { id } = await created.json();
  const reported = await fetch(`${server.url}/api/v1/pastes/${id}/report`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Forwarded-For': reporter },
    body: JSON.stringify({ reason: 'spam', note: 'ads' }),
  });
  assert.equal(reported.status, 202);
  return id;
}

async function signIn(page) {
  await page.goto(server.adminUrl + '/admin/review');
  assert.match(page.url(), /\/admin\/login$/, 'not signed in: the sign-in page');
  await page.fill('#token', TOKEN);
  await Promise.all([page.waitForNavigation(), page.click('#sign-in')]);
  assert.match(page.url(), /\/admin\/review$/);
}

// axe-core is evaluated in the page (not added as a script tag, which the page's CSP refuses).
async function violations(page, name) {
  await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map((n) => n.target.join(' ') + ': ' + n.failureSummary.replace(/\s+/g, ' ')),
    }));
  });
  return found.flatMap((v) => v.nodes.map((n) => `${name}: ${v.id} (${v.impact}, ${v.help}) at ${n}`));
}

test('sign in, see the entry with its clock, take it down: the public read is 451', async () => {
  const id = await reportedPaste('buy cheap watches', '198.51.100.7');
  const context = await chrome.browser.newContext({ javaScriptEnabled: false });
  try {
    const page = await context.newPage();
    await signIn(page);
    const row = page.locator(`#row-${id}`);
    await row.waitFor();
    assert.match(await row.locator('td.clock').innerText(), /^\d+ seconds?/);
    assert.match(await row.innerText(), /withheld \(451\)/);
    await Promise.all([page.waitForNavigation(), row.locator('button[value=takedown]').click()]);
    assert.match(await page.locator('#done').innerText(), new RegExp(`takedown of ${id}`));
    assert.equal(await page.locator(`#row-${id}`).count(), 0, 'out of the queue');
    const read = await fetch(`${server.url}/raw/${id}`);
    assert.equal(read.status, 451);
  } finally {
    await context.close();
  }
});

test('axe finds no violation on the sign-in page, the queue and a paste, also on a phone', async () => {
  const id = await reportedPaste('<b>not bold</b> and a long line '.repeat(40), '198.51.100.8');
  const problems = [];
  for (const [label, viewport] of [['desktop', { width: 1280, height: 900 }], ['phone', PHONE]]) {
    for (const colorScheme of ['light', 'dark']) {
      const context = await chrome.browser.newContext({ viewport, colorScheme });
      try {
        const page = await context.newPage();
        await page.goto(server.adminUrl + '/admin/login');
        problems.push(...await violations(page, `${label} ${colorScheme} sign-in`));
        await signIn(page);
        await page.locator(`#row-${id}`).waitFor();
        problems.push(...await violations(page, `${label} ${colorScheme} queue`));
        if (label === 'phone') {
          // Nothing wider than the phone: the queue's rows become cards.
          const wide = await page.evaluate(() => document.documentElement.scrollWidth);
          assert.ok(wide <= PHONE.width, `the queue fits a phone (${wide} px)`);
        }
        await page.goto(`${server.adminUrl}/admin/review/${id}`);
        assert.match(await page.locator('#text').innerText(), /<b>not bold<\/b>/);
        problems.push(...await violations(page, `${label} ${colorScheme} paste`));
      } finally {
        await context.close();
      }
    }
  }
  assert.deepEqual(problems, []);
});
