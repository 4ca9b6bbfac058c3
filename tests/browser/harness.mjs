// Starts the real sluice binary on a free port for the browser tests, and headless Chromium
// (Debian's package) through playwright-core. Each test file owns its processes and stops them.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { chromium } = require(join(repoRoot, 'node_modules', 'playwright-core'));

// The README's screenshots are refreshed only on request (SLUICE_SCREENSHOT_DIR=docs/screenshots):
// an ordinary test run must not rewrite tracked files.
export const screenshotDir = process.env.SLUICE_SCREENSHOT_DIR
  ? resolve(process.env.SLUICE_SCREENSHOT_DIR)
  : mkdtempSync(join(tmpdir(), 'sluice-screenshots-'));
if (!process.env.SLUICE_SCREENSHOT_DIR) {
  process.on('exit', () => rmSync(screenshotDir, { recursive: true, force: true }));
}

// Limits a browser test would trip by accident are lifted, as in tests/lib/sluice_harness.py.
const RELAXED = ['--ip-create-rate', '1000', '--ip-create-burst', '1000', '--ip-read-rate',
  '10000', '--ip-read-burst', '10000', '--ip-create-bytes-rate', '100000000',
  '--ip-create-bytes-burst', '100000000'];

// The browser tests are about pages, not dependency timeouts: on a busy CI machine the embedded
// store can miss the default 50 ms insert timeout and turn a create into a 503. The same patient
// timeouts as tests/lib/sluice_harness.py's PATIENT_TIMEOUTS.
const PATIENT = ['--read-budget', '5s', '--meta-get-timeout', '2s', '--blob-get-timeout', '3s',
  '--insert-timeout', '2s', '--put-timeout', '5s', '--create-budget', '10s', '--delete-budget', '5s',
  '--cache-timeout', '1s'];

// Tests read the log right after a page's requests (crypt, qr: the key never reaches it): each line
// written before its request is answered, as tests/lib/sluice_harness.py's SYNCHRONOUS_LOG.
const SYNCHRONOUS_LOG = ['--log-queue-lines', '0'];

export async function startSluice(extraArgs = [], { relaxed = true } = {}) {
  const bin = process.env.SLUICE_BIN || join(repoRoot, 'build', 'dev', 'sluice');
  const dir = mkdtempSync(join(tmpdir(), 'sluice-browser-'));
  const args = ['serve', '--listen', '127.0.0.1:0', '--data-dir', join(dir, 'data'),
    '--admin-listen', '127.0.0.1:0', '--threads', '2', ...PATIENT, ...SYNCHRONOUS_LOG, ...(relaxed ? RELAXED : []),
    ...extraArgs];
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('sluice did not start:\n' + log)), 15000);
    const onData = (chunk) => {
      log += chunk.toString();
      const m = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`sluice exited ${code}:\n${log}`)); });
  });
  child.removeAllListeners('exit');
  // The admin listener's URL, logged before "listening on" (src/app/server_process.cc).
  const admin = log.match(/admin listener at (http:\/\/127\.0\.0\.1:\d+)/);
  return {
    url,
    adminUrl: admin ? admin[1] : null,
    // Everything the server wrote so far (its log, the access log when --access-log is on).
    log: () => log,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// playwright gives every launch a fresh temporary profile of its own (it refuses --user-data-dir).
export async function launchBrowser() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  return {
    browser,
    async close() {
      await browser.close();
    },
  };
}

// What the abuse sketch adds to /api/v1/status (issue 14, item 6): aggregates only, since
// issue 32 (item 7) moved the top keys and prefixes to the admin listener.
export const ABUSE = {
  window_seconds: 60,
  budget_use: [{ le: 0.1, keys: 700 }, { le: 0.5, keys: 950 }, { le: 0.9, keys: 997 },
    { le: 1, keys: 997 }, { le: '+Inf', keys: 1000 }],
  global_cap_saturation: 0.42,
};

// The same abuse figures the sketch would send (or `abuse`), merged into the server's real answer.
// Close a page that has one with closeWithFixtures.
export async function withAbuseFixture(page, abuse = ABUSE) {
  await page.route('**/api/v1/status', async (route) => {
    const response = await route.fetch();
    const json = await response.json();
    json.abuse = abuse;
    json.reports_pending = 4;
    json.metrics.sluice_reports_pending = 4;
    await route.fulfill({ response, json });
  });
}

// The status page polls, so a fixture's handler may be mid-fetch when its page or context closes.
// Playwright then disposes the response under it, and the rejection surfaced as an unhandled one
// that failed a passing suite in CI (browser.a11y: "Response has been disposed"; checking
// page.isClosed() in the handler missed it, since the context closes before the page says so).
// Unrouting with ignoreErrors first is playwright's own way to end handlers still running.
export async function closeWithFixtures(pageOrContext) {
  const pages = 'pages' in pageOrContext ? pageOrContext.pages() : [pageOrContext];
  await Promise.all(pages.map((page) => page.unrouteAll({ behavior: 'ignoreErrors' })));
  await pageOrContext.close();
}
