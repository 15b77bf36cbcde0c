// What the console's browser tests share: Debian's Chromium started
// headless by playwright-core, a page that records every console error
// and uncaught exception, the screens and how to wait for one, and
// screenshots.

import {mkdirSync} from 'node:fs';
import {join} from 'node:path';
import {chromium} from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
export const SHOTS = process.env.SCREENSHOTS || '';

// env is a variable the script sets; missing, the test cannot run.
export function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the browser tests with scripts/console-e2e.sh (make console-test)`);
  return v;
}

// launch starts the browser. The flags keep Chromium from dialing out
// (this machine has no network but loopback) and let it run as root.
export async function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-default-apps', '--disable-extensions',
    ],
  });
}

// newPage opens a 1280x800 page whose console errors and uncaught
// exceptions are kept in page.problems. allow lists patterns of errors
// the test expects (a 401 while signed out).
export async function newPage(browser, {allow = [], ignoreHTTPSErrors = false} = {}) {
  const context = await browser.newContext({viewport: {width: 1280, height: 800}, ignoreHTTPSErrors});
  const page = await context.newPage();
  // Every wait of these tests is for something the page shows within a
  // few seconds; a failure should say so quickly.
  page.setDefaultTimeout(10000);
  page.problems = [];
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const text = msg.text();
    if (allow.some((re) => re.test(text))) return;
    page.problems.push(`console error: ${text} (${msg.location().url || 'page'})`);
  });
  page.on('pageerror', (err) => page.problems.push(`uncaught: ${err.message}`));
  page.on('dialog', (d) => {
    page.problems.push(`dialog opened: ${d.message()}`);
    d.dismiss();
  });
  return page;
}

// The screens, by the hash that shows them, and the file name of their
// screenshot under docs/console/.
export const SCREENS = [
  ['overview', '#/overview'],
  ['topics', '#/topics'],
  ['topic', '#/topics/orders'],
  ['messages', '#/messages?topic=orders'],
  ['groups', '#/groups'],
  ['group', '#/groups/native-readers'],
  ['streams', '#/streams'],
  ['security', '#/security'],
  ['history', '#/history'],
  ['charts', '#/charts'],
];

// show opens a screen and waits until its first load has ended: the
// view is no longer busy.
export async function show(page, base, hash) {
  const target = base + hash;
  if (page.url() === target) {
    // The screen shown: load it afresh, as a reader's click on it would.
    await page.reload();
  } else if (page.url().startsWith(base)) {
    await page.evaluate((h) => { location.hash = h; }, hash);
  } else {
    await page.goto(target);
  }
  await page.waitForSelector('#app:not([hidden])');
  await page.waitForFunction(() => {
    const v = document.getElementById('view');
    return v && !v.hasAttribute('aria-busy') && v.querySelector('.screen') && !v.querySelector('.loading');
  }, null, {timeout: 15000});
}

// shot saves a screenshot of the page as docs/console/NAME.png (or
// under $SCREENSHOTS) when screenshots are asked for.
export async function shot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, {recursive: true});
  await page.screenshot({path: join(SHOTS, name + '.png')});
}

// viewError is the error shown above the screen, or '' for none.
export async function viewError(page) {
  return page.evaluate(() => {
    const e = document.getElementById('view-error');
    return e && !e.hidden ? e.textContent : '';
  });
}
