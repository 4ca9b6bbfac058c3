// Proof of work in the browser (docs/overload.md, "Proof of work"): a flood of many addresses has
// spent the global create budget of a server with the rung on; the create form learns the
// challenge from /api/v1/limits, a Web Worker (web/static/pow.js) solves it with crypto.subtle
// while the page shows a progress bar and a status a screen reader announces, and the form then
// creates the paste on the solvers' share. The encrypted create meets the challenge in the 429's
// JSON and solves it the same way. Without JavaScript the form gets the 429 page, as without the
// rung. axe finds nothing on the page while it solves. The figure: Chromium's solve time per
// difficulty on this machine, printed (docs/overload.md quotes it).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSluice, launchBrowser, repoRoot } from './harness.mjs';

const AXE = readFileSync(join(repoRoot, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
// As tests/integration/test_proof_of_work.py: 20 creates in the global burst refilling at 0.01/s,
// 16 for everyone and 4 kept for solvers, so what each step spends is decided by counts.
const FLOOD = ['--trusted-proxy', '127.0.0.1', '--global-create-rate', '0.01',
  '--global-create-burst', '20'];
const BOTS = Array.from({ length: 40 }, (_, n) => `198.18.${n >> 8}.${(n & 255) + 1}`);

let server;
let chrome;
let context;

before(async () => {
  [server, chrome] = await Promise.all([
    startSluice([...FLOOD, '--proof-of-work', 'true', '--proof-of-work-share', '0.2']),
    launchBrowser(),
  ]);
  context = await chrome.browser.newContext({ viewport: { width: 1100, height: 800 } });
  // Each bot sends one create, under its own limit, until the global budget is spent.
  let created = 0;
  for (const bot of BOTS) {
    const r = await fetch(server.url + '/api/v1/pastes', {
      method: 'POST', body: 'from a bot', headers: { 'X-Forwarded-For': bot },
    });
    if (r.status === 201) created++;
  }
  assert.equal(created, 16, 'the flood spent everything but the solvers\' share');
});

after(async () => {
  if (context) await context.close();
  if (chrome) await chrome.close();
  if (server) await server.stop();
});

async function newPage(ctx = context) {
  const page = await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.errors = errors;
  return page;
}

async function violations(page) {
  if (!await page.evaluate(() => 'axe' in window)) await page.evaluate(AXE);
  return page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}) at ${n.target.join(' ')}`));
  });
}

test('without JavaScript the form gets the 429 page, as without the rung', { timeout: 240000 }, async () => {
  const noScript = await chrome.browser.newContext({ javaScriptEnabled: false });
  const page = await noScript.newPage();
  await page.goto(server.url + '/');
  await page.fill('textarea[name=content]', 'sent without a script\n');
  const [response] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  assert.equal(response.status(), 429);
  assert.ok(response.headers()['retry-after'], 'the 429 says when to come back');
  await noScript.close();
});

test('the form solves the challenge in a worker, says so, and creates the paste', { timeout: 240000 }, async () => {
  const page = await newPage();
  // The workers get their part of the search only once the page in its solving state has been
  // checked, so the checks never race the search (at the default difficulty it can end in a
  // fraction of a second). The page's own Worker is wrapped before its scripts run.
  await page.addInitScript(() => {
    const Real = window.Worker;
    let release;
    const held = new Promise((resolve) => { release = resolve; });
    window.releasePowForTest = release;
    window.Worker = class extends Real {
      postMessage(message) { held.then(() => super.postMessage(message)); }
    };
  });
  const proofs = [];
  page.on('request', (r) => {
    if (r.method() === 'POST') proofs.push(new URL(r.url()).searchParams.get('proof'));
  });
  await page.goto(server.url + '/');
  await page.fill('textarea[name=content]', 'an honest paste during a flood\n');
  const navigation = page.waitForNavigation({ timeout: 120000 });
  await page.click('button[type=submit]');

  const status = page.getByRole('status');
  await status.filter({ hasText: 'solves a small puzzle' }).waitFor({ timeout: 30000 });
  const bar = page.getByRole('progressbar', { name: 'Puzzle progress' });
  assert.ok(await bar.isVisible(), 'the progress bar is shown, named');
  assert.equal(await page.getAttribute('#create', 'aria-busy'), 'true');
  assert.ok(await page.locator('#create button[type=submit]').isDisabled(), 'one submission at a time');
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    assert.deepEqual(await violations(page), [], `axe while solving (${colorScheme})`);
  }

  await page.evaluate(() => window.releasePowForTest());
  const response = await navigation;
  assert.equal(response.status(), 201, 'the paste is created on the solvers\' share');
  const link = await page.inputValue('#share-link');
  const raw = await fetch(link.replace(/\/([^/]+)$/, '/raw/$1'));
  assert.equal(await raw.text(), 'an honest paste during a flood\n');
  assert.equal(proofs.length, 1, 'one create, carrying its solution');
  const sent = JSON.parse(Buffer.from(proofs[0], 'base64').toString());
  assert.equal(sent.algorithm, 'SHA-256');
  assert.equal(typeof sent.number, 'number');
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('the encrypted create meets the challenge in the 429 and solves it too', { timeout: 240000 }, async () => {
  const page = await newPage();
  await page.goto(server.url + '/');
  await page.check('#encrypt');
  await page.fill('textarea', 'a secret during a flood\n');
  const statuses = [];
  page.on('response', (r) => {
    if (r.url().endsWith('/api/v1/pastes')) statuses.push(r.status());
  });
  await page.click('button[type=submit]');
  await page.waitForSelector('#created', { timeout: 120000 });
  assert.deepEqual(statuses, [429, 201], 'refused with a challenge, then created with its solution');
  assert.match(await page.textContent('#pow-status'), /Solved in/);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('the status is in the reader\'s language', { timeout: 240000 }, async () => {
  const german = await chrome.browser.newContext({ extraHTTPHeaders: { 'Accept-Language': 'de' } });
  const page = await german.newPage();
  await page.goto(server.url + '/');
  // A challenge nobody can meet (its hash is of nothing searched), so the search runs to its end.
  const text = await page.evaluate(async () => {
    const solved = await window.sluicePow.solve({ algorithm: 'SHA-256', challenge: '00'.repeat(32),
      maxnumber: 1000, salt: 'x', signature: '' });
    return [solved, document.getElementById('pow-status').textContent,
      document.getElementById('pow-progress').getAttribute('aria-label')];
  });
  assert.equal(text[0], null, 'no solution past maxnumber');
  assert.match(text[1], /Rätsel/);
  assert.equal(text[2], 'Fortschritt des Rätsels');
  await german.close();
});

// The figure: a challenge made as the server makes them, with its secret number at maxnumber: the
// last worker finds it at the end of its part, the longest any solve takes (the page's workers
// split the range; the number is uniform, so a solve takes half this on average).
test('Chromium\'s solve time per difficulty', { timeout: 240000 }, async () => {
  const page = await newPage();
  await page.goto(server.url + '/');
  const rows = [];
  for (const maxnumber of [25000, 100000, 400000]) {
    const times = [];
    for (let round = 0; round < 3; round++) {
      const salt = randomBytes(12).toString('hex') + `?expires=${Math.floor(Date.now() / 1000) + 300}`;
      const challenge = createHash('sha256').update(salt + maxnumber).digest('hex');
      const result = await page.evaluate(async (c) => {
        const started = performance.now();
        const proof = await window.sluicePow.solve(c);
        return { proof, ms: performance.now() - started };
      }, { algorithm: 'SHA-256', challenge, maxnumber, salt, signature: '' });
      assert.ok(result.proof, 'solved');
      assert.equal(JSON.parse(Buffer.from(result.proof, 'base64').toString()).number, maxnumber);
      times.push(result.ms);
    }
    times.sort((a, b) => a - b);
    const median = times[1];
    rows.push({ maxnumber, longest_solve_ms: Math.round(median), slowest_of_3_ms: Math.round(times[2]),
      mean_solve_ms: Math.round(median / 2), hashes_per_s: Math.round((maxnumber + 1) / (median / 1000)) });
  }
  const workers = await page.evaluate(() => Math.min(4, navigator.hardwareConcurrency || 1));
  console.log(`Chromium's solve time, ${workers} workers (the longest solve, median of 3; a solve ` +
    'takes half on average):');
  console.table(rows);
  assert.deepEqual(page.errors, []);
  await page.close();
});
