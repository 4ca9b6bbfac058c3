// Accessibility and the status page's words: axe-core (npm) runs on every page sluice renders, in
// light and in dark, and any violation fails the test with its list; /status names things in words,
// gives every chart a unit and a time axis, and draws the abuse panels (from a fixture, through
// playwright's route(), where the server has no such data yet).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSluice, launchBrowser, repoRoot } from './harness.mjs';

const AXE = readFileSync(join(repoRoot, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

const SAMPLE = `def greet(name):
    # A comment, a string and a number, so every colour of the theme is on the page.
    return f"hello {name}" * 2
`;

// What the abuse sketch adds to /api/v1/status (issue 14, item 6).
const ABUSE = {
  window_seconds: 60,
  top_keys: [{ key: 'key-7f3a', creates: 120, refusals: 480 }, { key: 'key-0c11', creates: 90, refusals: 0 }],
  top_prefixes: [{ prefix: '203.0.113.0/24', creates: 210, refusals: 480 },
    { prefix: '2001:db8:1::/48', creates: 12, refusals: 0 }],
  budget_use: [{ le: 0.1, keys: 700 }, { le: 0.5, keys: 950 }, { le: 0.9, keys: 997 },
    { le: 1, keys: 997 }, { le: '+Inf', keys: 1000 }],
  global_cap_saturation: 0.42,
};

let server;
let strict;
let chrome;

before(async () => {
  // One report withholds a paste, so the 451 page is one click away; the quota is far above what
  // the pages below create, and below the one paste that asks for the 507 page.
  [server, strict, chrome] = await Promise.all([
    startSluice(['--report-hide-threshold', '1', '--max-storage-bytes', '20000']),
    startSluice(['--ip-create-rate', '0.01', '--ip-create-burst', '1'], { relaxed: false }),
    launchBrowser(),
  ]);
});

after(async () => {
  if (chrome) await chrome.close();
  if (server) await server.stop();
  if (strict) await strict.stop();
});

// axe-core is evaluated in the page (not added as a script tag, which the page's CSP refuses).
async function violations(page, name) {
  if (!await page.evaluate(() => 'axe' in window)) await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map((n) => n.target.join(' ') + ': ' + n.failureSummary.replace(/\s+/g, ' ')),
    }));
  });
  return found.flatMap((v) => v.nodes.map((n) => `${name}: ${v.id} (${v.impact}, ${v.help}) at ${n}`));
}

async function submit(page, url, text, { burn = false, lang = 'text' } = {}) {
  await page.goto(url + '/');
  await page.fill('textarea[name=content]', text);
  await page.selectOption('select[name=lang]', lang);
  if (burn) await page.check('#burn');
  const [response] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  return response;
}

// The same abuse figures the sketch would send, merged into the server's real answer.
async function withAbuseFixture(page) {
  await page.route('**/api/v1/status', async (route) => {
    const response = await route.fetch();
    const json = await response.json();
    json.abuse = ABUSE;
    json.reports_pending = 4;
    json.metrics.sluice_reports_pending = 4;
    await route.fulfill({ response, json });
  });
}

// Each page is checked in both themes (playwright's colorScheme emulation), so each is loaded once.
test('axe finds nothing on any page, light and dark', async () => {
  const context = await chrome.browser.newContext({ colorScheme: 'light', viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const found = [];
  const check = async (name, status, response) => {
    if (status !== undefined) assert.equal(response.status(), status, `${name} answers ${status}`);
    for (const colorScheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme });
      found.push(...await violations(page, `${name} (${colorScheme})`));
    }
  };

  await page.goto(server.url + '/');
  await check('new paste form');
  let response = await submit(page, server.url, 'plain words\n');
  await check('just created', 201, response);
  const link = await page.inputValue('#share-link');
  const deleteLink = await page.inputValue('#delete-link');
  await check('paste page', 200, await page.goto(link));
  response = await submit(page, server.url, SAMPLE, { lang: 'python' });
  const highlighted = await page.inputValue('#share-link');
  await page.goto(highlighted + '?lang=python');
  assert.ok(await page.locator('pre.code .hl-keyword').count() > 0, 'the view is highlighted');
  await check('highlighted view');

  await check('burn: just created', 201, await submit(page, server.url, 'once\n', { burn: true }));
  const burnLink = await page.inputValue('#share-link');
  await check('burn confirmation', 200, await page.goto(burnLink));
  response = (await Promise.all([page.waitForNavigation(), page.click('#confirm-burn')]))[0];
  await check('burned paste shown once', 200, response);

  await check('delete confirmation', 200, await page.goto(deleteLink));
  response = (await Promise.all([page.waitForNavigation(), page.click('#confirm-delete')]))[0];
  await check('deleted', 200, response);
  // Not the deleted paste's link: the browser's cache may still hold its page.
  await check('404: no such paste', 404, await page.goto(server.url + '/AAAAAAAAAAAA'));
  await check('404: no such route', 404, await page.goto(server.url + '/no/such/page'));
  await check('405: wrong method', 405, await page.goto(server.url + '/claim/' + link.split('/').pop()));

  await check('report form', 200, await page.goto(highlighted.replace(/\/([^/]+)$/, '/report/$1')));
  response = (await Promise.all([page.waitForNavigation(), page.click('#send-report')]))[0];
  await check('report sent', 200, response);
  await check('451: under review', 451, await page.goto(highlighted));

  await check('507: storage full', 507, await submit(page, server.url, 'x'.repeat(30000)));
  await submit(page, strict.url, 'one\n');
  await check('429: a limit', 429, await submit(page, strict.url, 'two\n'));

  await page.goto(server.url + '/status');
  await page.waitForSelector('#card-pools svg text');
  await check('status');
  await withAbuseFixture(page);
  await page.goto(server.url + '/status');
  await page.waitForSelector('#card-budget svg rect');
  await check('status with abuse panels');

  assert.deepEqual(errors, [], 'no script errors');
  assert.deepEqual(found, [], `axe violations:\n${found.join('\n')}`);
  await context.close();
});

test('/status names things in words, with units and time axes', async () => {
  const page = await chrome.browser.newPage({ viewport: { width: 1100, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const real = await (await page.request.get(server.url + '/api/v1/status')).json();
  await page.goto(server.url + '/status');
  // Two polls: rates need a previous one.
  await page.waitForSelector('#card-status [data-series]', { timeout: 10000 });
  const text = await page.textContent('#live');
  assert.doesNotMatch(text, /[{}]|="|sluice_/, 'no Prometheus names or label syntax');
  const pools = await page.textContent('#card-pools table');
  for (const name of ['create slots', 'read slots', 'highlighter slots']) assert.match(pools, new RegExp(name));
  assert.match(await page.textContent('#card-breakers table'), /metadata store\s*closed/);
  assert.match(await page.textContent('#card-breakers table'), /body store\s*closed/);
  assert.doesNotMatch(await page.textContent('#card-breakers table'), /\d\.\d\d/);
  // Counts are integers.
  for (const cell of await page.locator('#card-status td:nth-child(3)').allTextContents()) {
    assert.match(cell, /^[\d,]+$/, `a count is an integer: ${cell}`);
  }
  assert.match(await page.textContent('#card-storage table'), /\d+ (bytes|KB|MB)/);
  // Every time chart: its unit, ticks from five minutes ago to now.
  const charts = await page.locator('#live svg.chart').evaluateAll((svgs) => svgs.map((svg) => ({
    card: svg.closest('section').id,
    labels: Array.from(svg.querySelectorAll('text')).map((t) => t.textContent),
    label: svg.getAttribute('aria-label'),
  })));
  const units = { 'card-pools': 'slots', 'card-status': 'per second', 'card-sheds': 'per second',
    'card-latency': 'ms', 'card-breakers': 'state', 'card-ladder': 'per second', 'card-outbox': 'seconds',
    'card-storage': 'bytes' };
  for (const [card, unit] of Object.entries(units)) {
    const chart = charts.find((c) => c.card === card);
    assert.ok(chart, `${card} has a chart`);
    assert.equal(chart.labels[0], unit, `${card}'s unit`);
    for (const tick of ['\u22125 min', '\u22121 min', 'now']) assert.ok(chart.labels.includes(tick), `${card}: ${tick}`);
    assert.match(chart.label, /last 5 minutes/);
  }
  const breakerTicks = charts.find((c) => c.card === 'card-breakers').labels;
  for (const state of ['closed', 'half-open', 'open']) assert.ok(breakerTicks.includes(state));

  // Without the sketch's data: "no data", and no reports panel unless the server has the gauge.
  assert.match(await page.textContent('#card-top-keys'), /no data/);
  if (real.reports_pending === undefined && !('sluice_reports_pending' in real.metrics)) {
    assert.equal(await page.locator('#card-reports').count(), 0);
  }

  // With it: the tables and the distribution.
  await withAbuseFixture(page);
  await page.goto(server.url + '/status');
  await page.waitForSelector('#card-budget svg rect');
  assert.ok(await page.locator('#card-reports').isVisible());
  assert.match(await page.textContent('#card-reports table'), /reports waiting\s*4/);
  assert.match(await page.textContent('#card-top-keys'), /key-7f3a\s*120\s*480/);
  assert.match(await page.textContent('#card-top-prefixes'), /203\.0\.113\.0\/24\s*210\s*480/);
  // The buckets are cumulative, as a histogram's: 700 up to 10 %, 250 from 10 to 50 %, 3 over 100 %.
  const budget = await page.textContent('#card-budget table');
  assert.match(budget, /up to 10 %\s*700/);
  assert.match(budget, /10 % to 50 %\s*250/);
  assert.match(budget, /over 100 %\s*3/);
  assert.match(budget, /global create cap used\s*42 %/);
  assert.equal(await page.locator('#card-budget svg rect').count(), 5);
  assert.deepEqual(errors, []);
  await page.close();
});
