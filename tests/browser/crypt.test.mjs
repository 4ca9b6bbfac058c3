// End-to-end encrypted pastes in a real browser (docs/encryption.md): the page's script against
// the published vectors, round trips create -> view -> decrypt with and without a password and
// with burn, both directions with the CLI (every awkward byte, byte for byte), plain messages for
// a wrong password or a damaged link, the page without JavaScript, what reaches the server (the
// request bodies and the access log hold neither key nor text), axe-core on the new pages in
// light and dark, and the figures: encrypt and decrypt times of 1 MB, the script's size.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { startSluice, launchBrowser, repoRoot } from './harness.mjs';

const AXE = readFileSync(join(repoRoot, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
const VECTORS = JSON.parse(readFileSync(join(repoRoot, 'tests', 'vectors', 'envelope_v1.json'), 'utf8'));
const BIN = process.env.SLUICE_BIN || join(repoRoot, 'build', 'dev', 'sluice');
// What a textarea can hold: its value has LF line breaks only (HTML normalises CRLF), so CR
// travels through the CLI direction below.
const TYPED = '\ufeffBOM, NUL \u0000, 4-byte \u{1F600}, tab\t, Ümlaut\nsecond line\n';
const AWKWARD = Buffer.from('efbbbf424f4d2c2043524c460d0a4e554c20002c20342d6279746520f09f98802c206c6f6e652043520d2c206e6f2066696e616c206e65776c696e65', 'hex');

let server;
let chrome;
let context;

before(async () => {
  [server, chrome] = await Promise.all([
    startSluice(['--access-log', 'true', '--max-paste-bytes', '3000000']),
    launchBrowser(),
  ]);
  context = await chrome.browser.newContext({ viewport: { width: 1100, height: 800 }, acceptDownloads: true });
});

after(async () => {
  if (context) await context.close();
  if (chrome) await chrome.close();
  if (server) await server.stop();
});

function sluice(args, input, env = {}) {
  return execFileSync(BIN, args, { input, env: { PATH: process.env.PATH, ...env }, timeout: 60000,
    maxBuffer: 8 << 20 });
}

async function newPage() {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.errors = errors;
  return page;
}

// Creates through the page; returns { link, requests } with every request body the page sent.
async function createInBrowser(page, text, { password = '', burn = false } = {}) {
  const requests = [];
  page.on('request', (r) => requests.push({ url: r.url(), body: r.postData() || '' }));
  await page.goto(server.url + '/');
  // Set, not typed: a megabyte typed key by key takes minutes.
  await page.evaluate((t) => { document.getElementById('content').value = t; }, text);
  await page.check('#encrypt');
  if (password) await page.fill('#create-password', password);
  if (burn) await page.check('#burn');
  await page.click('button[type=submit]');
  await page.waitForSelector('#created');
  return { link: await page.inputValue('#share-link'), requests };
}

// The bytes the page's Download button saves, as a person gets them.
async function decryptedBytes(page) {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  return readFileSync(await download.path());
}

async function openLink(page, link, password) {
  await page.goto(link);
  await page.waitForSelector('#encrypted[data-state]');
  if (password !== undefined) {
    assert.equal(await page.getAttribute('#encrypted', 'data-state'), 'password');
    await page.fill('#paste-password', password);
    await page.click('#unlock-button');
    await page.waitForSelector('#encrypted[data-state=decrypted], #encrypted[data-state=wrong-password]');
  }
  return page.getAttribute('#encrypted', 'data-state');
}

test('the page script opens every published vector and seals the uncompressed ones exactly', async () => {
  const page = await newPage();
  await page.goto(server.url + '/');
  const result = await page.evaluate(async (vectors) => {
    const c = window.sluiceCrypt;
    const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    const out = { opened: [], sealed: [], failures: [] };
    for (const v of vectors.vectors) {
      const bytes = await c.open(v.envelope, v.key, v.password, 1000000);
      out.opened.push([v.name, hex(bytes) === v.plaintext_hex]);
      const e = c.parseEnvelope(v.envelope);
      if (e.z === 'none') {
        const plain = new Uint8Array(v.plaintext_hex.match(/../g) ? v.plaintext_hex.match(/../g).map((h) => parseInt(h, 16)) : []);
        const s = await c.seal(plain, v.password, { key: c.unb64u(v.key, 'key'), iv: e.iv, salt: e.kdf ? e.kdf.salt : undefined, iter: e.kdf ? e.kdf.iter : undefined, compress: false });
        out.sealed.push([v.name, s.envelope === v.envelope]);
      }
    }
    for (const f of vectors.failures) {
      try { await c.open(f.envelope, f.key, f.password, 1000000); out.failures.push([f.name, 'opened']); }
      catch (x) { out.failures.push([f.name, x.code]); }
    }
    return out;
  }, VECTORS);
  assert.deepEqual(result.opened, VECTORS.vectors.map((v) => [v.name, true]));
  assert.ok(result.sealed.length >= 3, 'uncompressed vectors sealed');
  for (const [name, same] of result.sealed) assert.ok(same, `${name} sealed to the published envelope`);
  assert.deepEqual(result.failures, VECTORS.failures.map((f) => [f.name, f.error]));
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('browser create -> view -> decrypt; the server never sees the key or the text', async () => {
  const page = await newPage();
  const logBefore = server.log().length;
  const { link, requests } = await createInBrowser(page, TYPED);
  const [base, key] = link.split('#');
  assert.match(key, /^[A-Za-z0-9_-]{43}$/);
  const view = await newPage();
  view.on('request', (r) => requests.push({ url: r.url(), body: r.postData() || '' }));
  assert.equal(await openLink(view, link), 'decrypted');
  assert.deepEqual(await decryptedBytes(view), Buffer.from(TYPED, 'utf8'));
  assert.equal((await view.textContent('#code')).split('\n')[1], 'second line');
  // Neither the key nor the text in any request (URL or body) nor in the server's log.
  const seen = requests.map((r) => r.url + '\n' + r.body).join('\n') + server.log().slice(logBefore);
  assert.ok(requests.some((r) => r.body.includes('"encrypted":true')), 'the create was seen');
  assert.ok(!seen.includes(key), 'the key reached the server');
  assert.ok(!seen.includes('second line') && !seen.includes('Ümlaut'), 'the text reached the server');
  // And the CLI opens what the browser made.
  assert.deepEqual(sluice(['get', link]), Buffer.from(TYPED, 'utf8'));
  assert.ok(base.startsWith(server.url));
  assert.deepEqual([...page.errors, ...view.errors], []);
  await page.close();
  await view.close();
});

test('a password is asked for; a wrong one says so and can be retried', async () => {
  const page = await newPage();
  const { link } = await createInBrowser(page, 'behind a password\n', { password: 'pässwörd 🔑' });
  const view = await newPage();
  assert.equal(await openLink(view, link, 'wrong'), 'wrong-password');
  assert.match(await view.textContent('#crypt-status'), /Wrong password/);
  assert.equal(await view.isHidden('#decrypted-tools'), true, 'no Copy or Download before the text');
  await view.fill('#paste-password', 'pässwörd 🔑');
  await view.click('#unlock-button');
  await view.waitForSelector('#encrypted[data-state=decrypted]');
  assert.equal(await view.textContent('#code'), 'behind a password\n');
  assert.deepEqual(sluice(['get', link], undefined, { SLUICE_PASSWORD: 'pässwörd 🔑' }), Buffer.from('behind a password\n'));
  assert.deepEqual([...page.errors, ...view.errors], []);
  await page.close();
  await view.close();
});

test('burn after reading: confirm, claim, decrypt, and then it is gone', async () => {
  const page = await newPage();
  const { link } = await createInBrowser(page, 'read once\n', { burn: true });
  const view = await newPage();
  await view.goto(link);
  await view.waitForSelector('#burn-confirm:not([hidden])');
  await view.click('#confirm-burn');
  await view.waitForSelector('#encrypted[data-state=decrypted]');
  assert.equal(await view.textContent('#code'), 'read once\n');
  const again = await fetch(link.split('#')[0], { headers: { Accept: 'text/html' } });
  assert.equal(again.status, 404);
  await page.close();
  await view.close();
});

test('the CLI encrypts every awkward byte and the browser shows it byte for byte', async () => {
  for (const [data, flags, env] of [[AWKWARD, [], {}], [Buffer.from('x'), [], {}],
    [AWKWARD, ['--password'], { SLUICE_PASSWORD: 'hunter2' }]]) {
    const link = sluice(['paste', '--server', server.url, '--encrypt', ...flags], data, env).toString().trim();
    const view = await newPage();
    const state = await openLink(view, link, flags.length ? 'hunter2' : undefined);
    assert.equal(state, 'decrypted');
    assert.deepEqual(await decryptedBytes(view), data);
    assert.deepEqual(view.errors, []);
    await view.close();
  }
});

test('a damaged link, a missing key or a damaged envelope says so plainly', async () => {
  const link = sluice(['paste', '--server', server.url, '--encrypt'], Buffer.from('text\n')).toString().trim();
  const [base, key] = link.split('#');
  const flipped = key.slice(0, 10) + (key[10] === 'A' ? 'B' : 'A') + key.slice(11);
  const cases = [[base + '#' + flipped, /does not open this paste/], [base + '#' + key.slice(0, 20), /damaged/],
    [base, /no key/]];
  // A stored envelope whose tag was altered (the server cannot tell): the reader says so.
  const env = JSON.parse(VECTORS.vectors[0].envelope);
  env.ct = env.ct.slice(0, -2) + (env.ct.at(-2) === 'A' ? 'B' : 'A') + env.ct.at(-1);
  const r = await fetch(server.url + '/api/v1/pastes?encrypted=1', { method: 'POST', body: JSON.stringify(env) });
  assert.equal(r.status, 201);
  cases.push([(await r.json()).url + '#' + VECTORS.vectors[0].key, /does not open this paste/]);
  for (const [bad, why] of cases) {
    const view = await newPage();
    assert.equal(await openLink(view, bad), 'failed');
    assert.match(await view.textContent('#crypt-status'), why);
    assert.equal(await view.isHidden('#code'), true, 'no text shown');
    assert.equal(await view.isHidden('#decrypted-tools'), true, 'no Copy or Download');
    assert.deepEqual(view.errors, []);
    await view.close();
  }
});

// The envelope's format errors are the page's language too (web/locale, docs/translations.md):
// a German reader of an envelope this script cannot read (a later version, say, served through a
// proxy) is told so in German, field names and values as they are.
test('a damaged envelope is named in the reader\'s language', async () => {
  const link = sluice(['paste', '--server', server.url, '--encrypt'], Buffer.from('text\n')).toString().trim();
  const german = await chrome.browser.newContext({ extraHTTPHeaders: { 'Accept-Language': 'de' } });
  const page = await german.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const cases = [[(env) => ({ ...env, v: 2 }), 'unbekannte Umschlag-Version 2'],
    [(env) => ({ ...env, iv: env.iv + '=' }), "'iv' ist kein kanonisches base64url ohne Auffüllung"]];
  for (const [alter, why] of cases) {
    // The envelope as the server stores it, altered on its way to the page.
    await page.route((url) => url.pathname.startsWith('/raw/'), async (route) => {
      const response = await route.fetch();
      await route.fulfill({ response, body: JSON.stringify(alter(JSON.parse(await response.text()))) });
    });
    assert.equal(await openLink(page, link), 'failed');
    assert.equal(await page.getAttribute('html', 'lang'), 'de');
    assert.equal(await page.textContent('#crypt-status'),
      'Dieses Paste kann nicht entschlüsselt werden: ' + why);
    await page.unrouteAll({ behavior: 'ignoreErrors' });
    await page.goto('about:blank'); // the same link again would only move to its fragment
  }
  assert.deepEqual(errors, []);
  await german.close();
});

test('without JavaScript the page says that this paste needs it', async () => {
  const link = sluice(['paste', '--server', server.url, '--encrypt'], Buffer.from('text\n')).toString().trim();
  const noJs = await chrome.browser.newContext({ javaScriptEnabled: false });
  const page = await noJs.newPage();
  await page.goto(link);
  assert.match(await page.textContent('#needs-js'), /needs JavaScript/);
  await noJs.close();
});

test('figures: 1 MB encrypted and decrypted in the browser, and the script size', async () => {
  const text = Array.from({ length: 20000 }, (_, i) => `line ${i} ` + 'abcdefghij'.repeat(4)).join('\n').slice(0, 1000000);
  const page = await newPage();
  const { link } = await createInBrowser(page, text);
  const encryptMs = Number(await page.getAttribute('#create', 'data-encrypt-ms'));
  const view = await newPage();
  assert.equal(await openLink(view, link), 'decrypted');
  const decryptMs = Number(await view.getAttribute('#encrypted', 'data-decrypt-ms'));
  assert.deepEqual(await decryptedBytes(view), Buffer.from(text));
  assert.deepEqual(sluice(['get', link]), Buffer.from(text), 'the CLI opens the browser\'s megabyte');
  // Random text does not compress: the same again without deflate's help.
  const random = randomBytes(500000).toString('hex');
  const creator = await newPage();
  const second = await createInBrowser(creator, random);
  const view2 = await newPage();
  assert.equal(await openLink(view2, second.link), 'decrypted');
  assert.deepEqual(await decryptedBytes(view2), Buffer.from(random));
  const script = await fetch(server.url + '/static/crypt.js');
  const bytes = (await script.arrayBuffer()).byteLength;
  const figures = { text_bytes: text.length, encrypt_ms: encryptMs, decrypt_ms: decryptMs,
    random_encrypt_ms: Number(await creator.getAttribute('#create', 'data-encrypt-ms')),
    random_decrypt_ms: Number(await view2.getAttribute('#encrypted', 'data-decrypt-ms')),
    script_bytes: bytes };
  console.log('crypt figures: ' + JSON.stringify(figures));
  assert.ok(bytes < 32768, 'the script stays small');
});

async function violations(page, name) {
  if (!await page.evaluate(() => 'axe' in window)) await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map((n) => n.target.join(' ') + ': ' + n.failureSummary.replace(/\s+/g, ' ')) }));
  });
  return found.flatMap((v) => v.nodes.map((n) => `${name}: ${v.id} (${v.impact}, ${v.help}) at ${n}`));
}

test('axe finds nothing on the encryption pages, light and dark', async () => {
  const found = [];
  const page = await newPage();
  const check = async (name) => {
    for (const colorScheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme });
      found.push(...await violations(page, `${name} (${colorScheme})`));
    }
  };
  await page.goto(server.url + '/');
  await page.check('#encrypt');
  await check('create, encrypt checked');
  await page.fill('#content', 'for axe\n');
  await page.fill('#create-password', 'pw');
  await page.click('button[type=submit]');
  await page.waitForSelector('#created');
  await check('encrypted paste created');
  const link = await page.inputValue('#share-link');
  await page.goto(link);
  await page.waitForSelector('#encrypted[data-state=password]');
  await check('password asked');
  await page.fill('#paste-password', 'wrong');
  await page.click('#unlock-button');
  await page.waitForSelector('#encrypted[data-state=wrong-password]');
  await check('wrong password');
  await page.fill('#paste-password', 'pw');
  await page.click('#unlock-button');
  await page.waitForSelector('#encrypted[data-state=decrypted]');
  await check('decrypted');
  await page.goto(link.split('#')[0]);
  await page.waitForSelector('#encrypted[data-state=failed]');
  await check('no key');
  const burn = sluice(['paste', '--server', server.url, '--encrypt'], Buffer.from('x\n')).toString().trim();
  const r = await fetch(server.url + '/api/v1/pastes', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ content: VECTORS.vectors[0].envelope, encrypted: true, burn: true }) });
  await page.goto((await r.json()).url + '#' + VECTORS.vectors[0].key);
  await page.waitForSelector('#burn-confirm:not([hidden])');
  await check('burn confirmation');
  assert.ok(burn);
  assert.deepEqual(page.errors, []);
  assert.deepEqual(found, [], `axe violations:\n${found.join('\n')}`);
});
