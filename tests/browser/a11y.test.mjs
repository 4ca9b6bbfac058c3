// Accessibility: axe-core (npm) runs on every page sluice renders, in light and in dark, and any
// violation fails the test with its list; then on the pages most read in each other shipped
// language (docs/translations.md), fewer of them, so six languages do not multiply the time.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSluice, launchBrowser, repoRoot, withAbuseFixture, closeWithFixtures } from './harness.mjs';

const AXE = readFileSync(join(repoRoot, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

const SAMPLE = `def greet(name):
    # A comment, a string and a number, so every colour of the theme is on the page.
    return f"hello {name}" * 2
`;

let server;
let strict;
let chrome;

before(async () => {
  // One report withholds a paste, so the 451 page is one click away (from another network than
  // the creator's, through the trusted loopback balancer: reports from the creator's own network
  // never withhold, docs/moderation.md); the quota is far above what the pages below create, and
  // below the one paste that asks for the 507 page.
  [server, strict, chrome] = await Promise.all([
    startSluice(['--report-hide-threshold', '1', '--max-storage-bytes', '20000',
                 '--trusted-proxy', '127.0.0.1',
                 '--abuse-contact', 'mailto:abuse@paste.example, https://paste.example/contact',
                 '--abuse-policy-text', 'Pastes that break the law of the Netherlands are removed.']),
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

  await page.setExtraHTTPHeaders({ 'X-Forwarded-For': '198.51.100.7' });
  await check('report form', 200, await page.goto(highlighted.replace(/\/([^/]+)$/, '/report/$1')));
  response = (await Promise.all([page.waitForNavigation(), page.click('#send-report')]))[0];
  await check('report sent', 200, response);
  await page.setExtraHTTPHeaders({});
  await check('451: under review', 451, await page.goto(highlighted));

  await check('507: storage full', 507, await submit(page, server.url, 'x'.repeat(30000)));
  await submit(page, strict.url, 'one\n');
  await check('429: a limit', 429, await submit(page, strict.url, 'two\n'));

  // The public contact: every section shown (contacts, security.txt, the operator's words).
  await check('abuse', 200, await page.goto(server.url + '/abuse'));
  await check('abuse, no contact set', 200, await page.goto(strict.url + '/abuse'));
  // The transparency report, with the withholding above counted.
  await check('transparency', 200, await page.goto(server.url + '/transparency'));

  await page.goto(server.url + '/status');
  await page.waitForSelector('#card-pools svg text');
  await check('status');
  await withAbuseFixture(page);
  await page.goto(server.url + '/status');
  await page.waitForSelector('#card-budget svg rect');
  await check('status with abuse panels');

  assert.deepEqual(errors, [], 'no script errors');
  assert.deepEqual(found, [], `axe violations:\n${found.join('\n')}`);
  await closeWithFixtures(context);
});

// The other languages: the create form, a paste just created (its notices, copy buttons and QR
// code, whose label comes from qr.js's messages), the burn confirmation, the 404 page and /abuse,
// in each theme. Longer words and other scripts must not break a label, a contrast or the lang markup.
test('axe finds nothing in every other language, light and dark', async () => {
  const languages = { de: 'de-CH', es: 'es', fr: 'fr-FR', ja: 'ja', 'zh-Hans': 'zh-CN' };
  const found = [];
  const errors = [];
  for (const [tag, accept] of Object.entries(languages)) {
    const context = await chrome.browser.newContext({
      colorScheme: 'light', viewport: { width: 1100, height: 800 },
      extraHTTPHeaders: { 'Accept-Language': accept },
    });
    const page = await context.newPage();
    page.on('pageerror', (e) => errors.push(`${tag}: ${e.message}`));
    const check = async (name, status, response) => {
      if (status !== undefined) assert.equal(response.status(), status, `${tag} ${name} answers ${status}`);
      assert.equal(await page.getAttribute('html', 'lang'), tag, `${name} is in ${tag}`);
      for (const colorScheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme });
        found.push(...await violations(page, `${tag} ${name} (${colorScheme})`));
      }
    };
    await page.goto(server.url + '/');
    await check('new paste form');
    await check('just created', 201, await submit(page, server.url, 'plain words\n'));
    const label = await page.getAttribute('#share-link-qr', 'aria-label');
    assert.ok(label && label !== 'QR code of the link', `${tag}: the QR code's label is translated (${label})`);
    await check('burn confirmation', 200, await page.goto(
      (await submit(page, server.url, 'once\n', { burn: true }), await page.inputValue('#share-link'))));
    await check('404: no such paste', 404, await page.goto(server.url + '/AAAAAAAAAAAA'));
    await check('abuse', 200, await page.goto(server.url + '/abuse'));
    await check('transparency', 200, await page.goto(server.url + '/transparency'));
    await context.close();
  }
  assert.deepEqual(errors, [], 'no script errors');
  assert.deepEqual(found, [], `axe violations:\n${found.join('\n')}`);
});

