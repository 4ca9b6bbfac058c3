// The README's screenshot (docs/images/paste-page.png): one highlighted paste, as a visitor with
// the link sees it, in Debian's chromium through playwright-core, with the browser tests' harness
// (tests/browser/harness.mjs). Run after `npm ci` and a build:
//   node tools/readme-screenshot.mjs [OUT]       (SLUICE_BIN names the binary, as for the tests)
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSluice, launchBrowser, repoRoot } from '../tests/browser/harness.mjs';

const out = process.argv[2] || join(repoRoot, 'docs', 'images', 'paste-page.png');
const SAMPLE = `# Split a log into requests per status, the way the status page counts them.
import collections
import sys


def by_status(lines):
    counts = collections.Counter()
    for line in lines:
        fields = line.split()
        if len(fields) > 8 and fields[8].isdigit():
            counts[int(fields[8])] += 1
    return counts


if __name__ == "__main__":
    for status, n in sorted(by_status(sys.stdin).items()):
        print(f"{status} {n:>8}")
`;

const server = await startSluice();
const chrome = await launchBrowser();
try {
  const created = await fetch(server.url + '/api/v1/pastes', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ content: SAMPLE, language: 'python' }),
  });
  if (created.status !== 201) throw new Error(`create answered ${created.status}`);
  const { url } = await created.json();
  const context = await chrome.browser.newContext({ colorScheme: 'light', viewport: { width: 880, height: 560 } });
  const page = await context.newPage();
  const view = await page.goto(url + '?lang=python');
  if (view.status() !== 200) throw new Error(`view answered ${view.status()}`);
  writeFileSync(out, await page.screenshot());
  console.log(`wrote ${out}`);
} finally {
  await chrome.close();
  await server.stop();
}
