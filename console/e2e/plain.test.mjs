// The console against a cluster with security off, seeded by
// scripts/console-e2e.sh: every screen loads without a browser error and
// shows the security-off banner; the live tail shows a record kcat wrote
// within a second; a search finds a record by a header; record contents
// are shown and never run; reset-offsets shows its dry run and then
// moves the group.

import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import {readFileSync} from 'node:fs';
import {after, before, beforeEach, test} from 'node:test';

import {env, launch, newPage, SCREENS, shot, show, viewError} from './lib.mjs';

const BASE = env('CONSOLE_URL');
const KAFKA = env('KAFKA_BROKER');
const KCAT = process.env.KCAT || 'kcat';

let browser;
let page;

before(async () => {
  browser = await launch();
  page = await newPage(browser);
});

after(async () => {
  await browser?.close();
});

// Each test answers for the browser errors of its own steps.
beforeEach(() => {
  if (page) page.problems.length = 0;
});

// api reads the console's API from this process, as a check beside what
// the page shows.
async function api(path) {
  const res = await fetch(new URL('api/' + path, BASE));
  assert.equal(res.status, 200, `GET ${path}: ${res.status} ${await res.clone().text()}`);
  return res.json();
}

test('the page and the API answer with the console\'s security headers', async () => {
  const res = await page.goto(BASE);
  const h = res.headers();
  assert.match(h['content-security-policy'], /default-src 'self'/);
  assert.match(h['content-security-policy'], /frame-ancestors 'none'/);
  assert.equal(h['x-frame-options'], 'DENY');
  assert.equal(h['x-content-type-options'], 'nosniff');
  assert.equal(h['referrer-policy'], 'no-referrer');

  const who = await fetch(new URL('api/whoami', BASE));
  assert.equal(who.headers.get('cache-control'), 'no-store');
  const body = await who.json();
  assert.equal(body.security, false);

  // A change without the console's header is refused before anything
  // is read, even with security off.
  const forged = await fetch(new URL('api/acls', BASE), {
    method: 'POST',
    headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({principal: 'mallory', resource: 'cluster', name: '', pattern: 'literal', operation: 'alter'}),
  });
  assert.equal(forged.status, 403);
  assert.match((await forged.json()).error, /X-Gostream-Console/);
});

test('every screen loads without a browser error and shows that security is off', async () => {
  for (const [name, hash] of SCREENS) {
    await show(page, BASE, hash);
    assert.equal(await viewError(page), '', `${name}: the screen shows an error`);
    assert.equal(await page.isVisible('#insecure'), true, `${name}: no security-off banner`);
    const text = await page.evaluate(() => document.getElementById('view').innerText);
    assert.doesNotMatch(text, /\b(undefined|NaN|null)\b|\[object /, `${name}: the screen shows a value that is not one`);
    await shot(page, name);
  }
  assert.deepEqual(page.problems, []);
});

test('the topics list shows the groups that read a topic, Kafka\'s and native', async () => {
  await show(page, BASE, '#/topics');
  const row = page.locator('#view tr', {hasText: 'orders'}).first();
  await row.getByText('kafka-readers').waitFor();
  await row.getByText('native-readers').waitFor();
  assert.deepEqual(page.problems, []);
});

test('a record kcat produces appears in the live tail within a second', async () => {
  await show(page, BASE, '#/messages?topic=orders');
  await page.click('#tail-toggle');
  await page.waitForSelector('#tail-state.live.open');
  const value = `tail-${Date.now()}`;
  execFileSync(KCAT, ['-b', KAFKA, '-P', '-t', 'orders', '-K:', '-H', 'source=kcat'], {input: `tail-key:${value}\n`});
  const written = Date.now();
  await page.locator('#tail-records').getByText(value).waitFor({timeout: 5000});
  const took = Date.now() - written;
  assert.ok(took <= 1000, `the record took ${took} ms to appear`);
  await shot(page, 'tail');
  await page.click('#tail-toggle');
  assert.deepEqual(page.problems, []);
});

test('a search finds a record by a header', async () => {
  await show(page, BASE, '#/messages?topic=orders');
  await page.fill('#msg-q', 'needle-7f3a');
  await page.uncheck('#msg-in-key');
  await page.uncheck('#msg-in-value');
  await page.click('#msg-form button[type=submit]');
  await page.locator('#msg-info', {hasText: 'matching'}).waitFor();
  const rows = page.locator('#msg-results tbody tr');
  assert.equal(await rows.count(), 1);
  const text = await rows.first().textContent();
  assert.match(text, /needle-7f3a/);
  assert.match(text, /found by its header/);
  await shot(page, 'search');

  // The same text in values only finds nothing: it is in a header.
  await page.check('#msg-in-value');
  await page.uncheck('#msg-in-headers');
  await page.click('#msg-form button[type=submit]');
  await page.locator('#msg-results td.empty').waitFor();
  assert.deepEqual(page.problems, []);
});

test('record contents are shown as text, never run', async () => {
  await show(page, BASE, '#/messages?topic=orders');
  await page.locator('#msg-results').getByText('<script>window.__pwned=1</script>', {exact: false}).first().waitFor();
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator('#msg-results img, #msg-results script').count(), 0);
  assert.deepEqual(page.problems, []);
});

test('values switch to hex, and the records shown download as JSON', async () => {
  await show(page, BASE, '#/messages?topic=orders');
  await page.fill('#msg-q', 'needle-7f3a');
  await page.click('#msg-form button[type=submit]');
  await page.locator('#msg-info', {hasText: 'matching'}).waitFor();
  await page.getByRole('button', {name: 'Hex'}).click();
  // {"order" in hex.
  await page.locator('#msg-results').getByText('7b 22 6f 72 64 65 72 22').waitFor();

  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#msg-download')]);
  assert.equal(download.suggestedFilename(), 'orders-records.json');
  const records = JSON.parse(readFileSync(await download.path(), 'utf8'));
  assert.equal(records.length, 1);
  assert.equal(records[0].headers.find((h) => h.key === 'trace-id').value.text, 'needle-7f3a');
  assert.ok(records[0].value.b64);
  assert.deepEqual(page.problems, []);
});

test('a list sorts by the column clicked, either way', async () => {
  await show(page, BASE, '#/topics');
  const first = () => page.locator('#view tbody tr').first().locator('td').first().textContent();
  await page.getByRole('button', {name: 'Records'}).click();
  assert.equal(await first(), 'orders');
  await page.getByRole('button', {name: 'Records'}).click();
  assert.equal(await first(), 'audit-log');
  assert.deepEqual(page.problems, []);
});

test('the produce form writes a record the page then finds', async () => {
  await show(page, BASE, '#/messages?topic=orders');
  const value = `from-the-page-${Date.now()}`;
  await page.fill('#produce-key', 'page-key');
  await page.fill('#produce-value', JSON.stringify({value}));
  await page.fill('#produce-headers', 'origin=console\ntrace-id=page-1');
  await page.click('#produce-form button[type=submit]');
  await page.locator('#produce-form', {hasText: 'Written to partition'}).waitFor();
  await page.fill('#msg-q', value);
  await page.click('#msg-form button[type=submit]');
  await page.locator('#msg-info', {hasText: 'matching'}).waitFor();
  const text = await page.locator('#msg-results tbody').textContent();
  assert.match(text, /page-key/);
  assert.match(text, /origin: console/);
  assert.deepEqual(page.problems, []);
});

test('reset-offsets shows its dry run, and confirmed, moves the group', async () => {
  const committed = async () => (await api('groups/native-readers')).partitions
    .filter((o) => o.topic === 'orders').map((o) => o.committed);
  const before = await committed();
  assert.ok(before.some((c) => c > 0), `native-readers has committed nothing on orders: ${before}`);

  await show(page, BASE, '#/groups/native-readers');
  await page.selectOption('#reset-topic', 'orders');
  await page.selectOption('#reset-to', 'earliest');
  await page.click('#reset-dry-run');
  await page.locator('#reset-result', {hasText: 'Dry run'}).waitFor();
  assert.equal(await page.locator('#reset-result tbody tr').count(), 3);
  await shot(page, 'reset-offsets');
  // A dry run writes nothing.
  assert.deepEqual(await committed(), before);

  await page.click('#reset-execute');
  await page.locator('#reset-result', {hasText: 'Done'}).waitFor();
  const now = await committed();
  assert.deepEqual(now, now.map(() => 0), `after the reset: ${now}`);
  assert.deepEqual(page.problems, []);
});

test('the charts draw this node\'s samples as SVG lines', async () => {
  // The node samples every 10 s; by now this run has several.
  await show(page, BASE, '#/charts');
  // The screen reloads its data every 5 s: lines appear once the node
  // has two samples.
  await page.waitForFunction(() => document.querySelectorAll('#view svg path.line').length >= 2, null, {timeout: 30000, polling: 1000});
  await shot(page, 'charts');
  assert.deepEqual(page.problems, []);
});

test('a group without members is deleted, once confirmed', async () => {
  await show(page, BASE, '#/groups/kafka-readers');
  await page.click('#delete-group');
  await page.click('#delete-confirm');
  await page.waitForFunction(() => location.hash === '#/groups');
  const res = await fetch(new URL('api/groups/kafka-readers', BASE));
  assert.equal(res.status, 404, await res.text());
  assert.deepEqual(page.problems, []);
});
