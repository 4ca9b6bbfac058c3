// /status speaks to people: names in words, counts as integers, every chart with its unit and a
// time axis, and the abuse panels drawn from /api/v1/status's "abuse" object (a fixture served
// through playwright's route() where the server has no such data yet): aggregates that name nobody.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startSluice, launchBrowser, withAbuseFixture, closeWithFixtures, ABUSE } from './harness.mjs';

let server;
let chrome;

before(async () => {
  [server, chrome] = await Promise.all([startSluice(), launchBrowser()]);
});

after(async () => {
  if (chrome) await chrome.close();
  if (server) await server.stop();
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

  // No panel names a client or a network; no reports panel unless the server has the gauge.
  assert.equal(await page.locator('#card-top-keys, #card-top-prefixes').count(), 0);
  assert.equal(real.abuse.top_keys, undefined, 'the public status names no key');
  assert.equal(real.abuse.top_prefixes, undefined, 'the public status names no prefix');
  if (real.reports_pending === undefined && !('sluice_reports_pending' in real.metrics)) {
    assert.equal(await page.locator('#card-reports').count(), 0);
  }

  // With it: the tables and the distribution.
  await withAbuseFixture(page);
  await page.goto(server.url + '/status');
  await page.waitForSelector('#card-budget svg rect');
  assert.ok(await page.locator('#card-reports').isVisible());
  assert.match(await page.textContent('#card-reports table'), /reports waiting\s*4/);
  // The buckets are cumulative, as a histogram's: 700 up to 10 %, 250 from 10 to 50 %, 3 over 100 %.
  const budget = await page.textContent('#card-budget table');
  assert.match(budget, /up to 10 %\s*700/);
  assert.match(budget, /10 % to 50 %\s*250/);
  assert.match(budget, /over 100 %\s*3/);
  assert.match(budget, /global create cap used\s*42 %/);
  assert.equal(await page.locator('#card-budget svg rect').count(), 5);
  assert.deepEqual(errors, []);
  await closeWithFixtures(page);
});

test('/status draws no name even from an answer that carries some', async () => {
  // An older server (or a proxy's cached answer) with the top lists: the page still shows none.
  const page = await chrome.browser.newPage({ viewport: { width: 1100, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await withAbuseFixture(page, { ...ABUSE,
    top_keys: [{ key: '198.51.100.7', creates: 120, refusals: 480 }, { key: 'key-7f3a', creates: 9, refusals: 0 }],
    top_prefixes: [{ prefix: '203.0.113.0/24', creates: 210, refusals: 480 },
      { prefix: '2001:db8:1::/48', creates: 12, refusals: 0 }] });
  await page.goto(server.url + '/status');
  await page.waitForSelector('#card-budget svg rect');
  const text = await page.textContent('body');
  for (const name of ['198.51.100.7', 'key-7f3a', '203.0.113.0/24', '2001:db8:1::/48']) {
    assert.ok(!text.includes(name), `the page shows ${name}`);
  }
  assert.match(await page.textContent('#card-budget'), /sluice admin top/);
  assert.deepEqual(errors, []);
  await closeWithFixtures(page);
});

// Every label the panels draw, as text: titles, notes, table headers and cells, the charts' axis
// and tick labels and their aria-labels. The English render's labels are the msgids.
async function drawnLabels(context) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await withAbuseFixture(page);
  await page.goto(server.url + '/status');
  // Two polls (rates need a previous one) and the abuse panels.
  await page.waitForSelector('#card-status [data-series]', { timeout: 10000 });
  await page.waitForSelector('#card-budget svg rect');
  const lang = await page.getAttribute('html', 'lang');
  const labels = await page.locator('#live').evaluate((live) => [
    ...Array.from(live.querySelectorAll('h2, p, th, td, svg text'), (e) => e.textContent.trim()),
    ...Array.from(live.querySelectorAll('svg[aria-label]'), (e) => e.getAttribute('aria-label')),
  ].filter((text) => text !== ''));
  assert.deepEqual(errors, []);
  await closeWithFixtures(context);
  return { lang, labels };
}

test('/status draws its panels in the reader\'s language: no English label left', async () => {
  const options = { viewport: { width: 1100, height: 900 } };
  const english = await drawnLabels(await chrome.browser.newContext({
    ...options, extraHTTPHeaders: { 'Accept-Language': 'en' } }));
  assert.equal(english.lang, 'en');
  assert.ok(english.labels.includes('Slots in use'), 'the English render has the panels');
  const german = await chrome.browser.newContext(options);
  await german.addCookies([{ name: 'sluice_lang', value: 'de', url: server.url }]);
  const japanese = await chrome.browser.newContext({
    ...options, extraHTTPHeaders: { 'Accept-Language': 'ja' } });
  // Words a language writes as English does: units, a status line's "OK", and German's "Pool",
  // "Status" and "Limiter". A label made only of these (and numbers) may appear in both renders.
  const same = { de: ['OK', 'KB', 'MB', 'GB', 'TB', 'ms', 'min', 'Pool', 'Status', 'Limiter'],
    ja: ['OK', 'KB', 'MB', 'GB', 'TB'] };
  for (const [tag, context] of [['de', german], ['ja', japanese]]) {
    const drawn = await drawnLabels(context);
    assert.equal(drawn.lang, tag);
    const left = drawn.labels.filter((text) => english.labels.includes(text) &&
      (text.match(/[A-Za-z]{2,}/g) || []).some((word) => !same[tag].includes(word)));
    assert.deepEqual([...new Set(left)], [], `English labels in the ${tag} render`);
    // The numbers are the language's: German writes 12,5 where English writes 12.5 (and 1.000
    // where English writes 1,000).
    if (tag === 'de') {
      const point = drawn.labels.filter((text) => /\d\.\d(?!\d\d)/.test(text));
      assert.deepEqual(point, [], 'German decimals have a comma');
    }
  }
});
