// A complete test of an application's mail against a running inboxd, with Node's own test
// runner and fetch (Node 18 or later, nothing to install). examples/run.sh starts inboxd
// with examples/fixture.json and runs it: INBOXD_URL is the server, INBOXD_KEY the
// fixture's account key.
import { test } from 'node:test';
import assert from 'node:assert/strict';

const base = process.env.INBOXD_URL;
const key = process.env.INBOXD_KEY;
const inbox = 'team@example.test'; // two inboxes of examples/fixture.json
const other = 'billing@example.test';

async function api(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

test('a sent message arrives, and the reply threads with it', async () => {
  assert.ok(base && key, 'set INBOXD_URL and INBOXD_KEY (examples/run.sh does)');
  const path = `/v1/inboxes/${encodeURIComponent(inbox)}/messages`;
  const since = new Date().toISOString();
  const subject = `Lunch on Friday ${Date.now()}`;

  // From the other inbox to this one: inboxd delivers it locally.
  const sent = await api('POST', `/v1/inboxes/${encodeURIComponent(other)}/messages/send`, {
    to: [inbox], subject, text: 'Are you in?', idempotencyKey: `node-${subject}`,
  });
  assert.equal(sent.status, 200, JSON.stringify(sent.body));

  // Wait for the delivery instead of sleeping.
  const query = new URLSearchParams({ since, query: `subject:"${subject}"`, timeout: '10' });
  const waited = await api('GET', `${path}/wait?${query}`);
  assert.equal(waited.status, 200, JSON.stringify(waited.body));
  assert.equal(waited.body.timedOut, false);
  const [received] = waited.body.messages;
  assert.equal(received.subject, subject);

  const reply = await api('POST', `${path}/${encodeURIComponent(received.messageId)}/reply`, {
    text: 'Yes!', idempotencyKey: `node-reply-${subject}`,
  });
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  assert.equal(reply.body.threadId, received.threadId);
});

test('a retried send with the same idempotency key is not sent twice', async () => {
  const body = { to: ['someone@elsewhere.example'], subject: 'Once', text: 'only once', idempotencyKey: `node-once-${Date.now()}` };
  const first = await api('POST', `/v1/inboxes/${encodeURIComponent(inbox)}/messages/send`, body);
  const again = await api('POST', `/v1/inboxes/${encodeURIComponent(inbox)}/messages/send`, body);
  assert.equal(first.status, 200, JSON.stringify(first.body));
  assert.equal(again.body.messageId, first.body.messageId);
  assert.equal(again.body.deduplicated, true);
});
