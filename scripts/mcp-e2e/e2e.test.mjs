// End-to-end test of inboxd's hosted MCP server with the official TypeScript client, as a
// new user would connect: POST /mcp with an account key. run.sh starts the real binary and
// sets INBOXD_URL, INBOXD_API_KEY (full scopes), INBOXD_READONLY_KEY, INBOXD_INBOX (a
// seeded inbox holding one message with an attachment) and INBOXD_BIN (the binary, for
// `inboxd mcp` on stdio).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const base = process.env.INBOXD_URL;
const key = process.env.INBOXD_API_KEY;
const readOnlyKey = process.env.INBOXD_READONLY_KEY;
const seeded = process.env.INBOXD_INBOX;
const binary = process.env.INBOXD_BIN;
assert.ok(base && key && readOnlyKey && seeded && binary, "run this through run.sh");

async function connect(apiKey) {
  const client = new Client({ name: "inboxd-e2e", version: "1.0.0" });
  const headers = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", base), { requestInit: { headers } }));
  return client;
}

// call returns the REST result of a tool that must succeed.
async function call(client, name, args = {}) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name} failed: ${res.content?.[0]?.text}`);
  assert.equal(res.content[0].type, "text");
  assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent.result, `${name}: text and structuredContent differ`);
  return res.structuredContent.result;
}

// fails returns the error of a tool call that must fail.
async function fails(client, name, args = {}) {
  const res = await client.callTool({ name, arguments: args });
  assert.equal(res.isError, true, `${name} should have failed: ${res.content?.[0]?.text}`);
  const { error } = JSON.parse(res.content[0].text);
  assert.equal(typeof error.code, "string");
  assert.equal(typeof error.message, "string");
  return error;
}

async function eventually(what, fn) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let client;
before(async () => {
  client = await connect(key);
});
after(async () => {
  await client?.close();
});

test("server info and instructions", () => {
  assert.equal(client.getServerVersion().name, "inboxd");
  const instructions = client.getInstructions();
  assert.match(instructions, /untrusted/);
  assert.match(instructions, /senderAuthentication/);
});

test("lists the spec's 17 tools in its order, then wait_for_message, with schemas and annotations", async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), [
    "list_inboxes", "create_inbox", "get_inbox", "update_inbox", "delete_inbox", "finish_inbox_setup",
    "list_messages", "search_messages", "get_message", "send", "reply", "update_message_labels",
    "get_attachment", "list_threads", "get_thread", "update_thread_labels", "get_usage", "wait_for_message",
  ]);
  const send = tools.find((t) => t.name === "send");
  assert.deepEqual([...send.inputSchema.required].sort(), ["idempotencyKey", "inboxId", "to"]);
  assert.equal(send.inputSchema.additionalProperties, false);
  assert.equal(send.annotations.destructiveHint, true);
  const get = tools.find((t) => t.name === "get_message");
  assert.equal(get.annotations.readOnlyHint, true);
  assert.match(get.description, /senderAuthentication/);
});

test("a read-only key lists only the read tools", async () => {
  const ro = await connect(readOnlyKey);
  try {
    const { tools } = await ro.listTools();
    assert.equal(tools.length, 10); // the spec's 9 read tools and wait_for_message
    assert.ok(!tools.some((t) => t.name === "send"));
  } finally {
    await ro.close();
  }
});

test("no key is refused", async () => {
  await assert.rejects(connect(""), /401|unauthorized/i);
});

test("reads the seeded inbox: list_messages, get_message, get_attachment", async () => {
  const list = await call(client, "list_messages", { inboxId: seeded, limit: 10 });
  assert.equal(list.messages.length, 1);
  const summary = list.messages[0];
  const msg = await call(client, "get_message", { inboxId: seeded, messageId: summary.messageId });
  assert.equal(msg.messageId, summary.messageId);
  assert.equal(msg.text, "Hello from the fixture.");
  const att = await call(client, "get_attachment", {
    inboxId: seeded, messageId: msg.messageId, attachmentId: msg.attachments[0].attachmentId,
  });
  assert.equal(att.filename, "note.txt");
  const download = await fetch(att.downloadUrl);
  assert.equal(download.status, 200);
  assert.equal(await download.text(), "attached text\n");
});

test("every other tool, as a new user would use them", async () => {
  assert.ok((await call(client, "list_inboxes")).inboxes.length >= 1);
  assert.equal(typeof (await call(client, "get_usage")), "object");

  const inbox = await call(client, "create_inbox", { username: "e2e-agent", displayName: "E2E agent" });
  assert.equal(inbox.inboxId, "e2e-agent@inboxd.test");
  assert.deepEqual(await call(client, "get_inbox", { inboxId: inbox.inboxId }), inbox);
  assert.equal((await call(client, "update_inbox", { inboxId: inbox.inboxId, group: "agents" })).group, "agents");
  assert.equal((await call(client, "finish_inbox_setup", { inboxId: inbox.inboxId })).deliveryStatus, "ready");

  const sent = await call(client, "send", {
    inboxId: inbox.inboxId, to: [seeded], subject: "From the e2e test", text: "Hello over MCP", idempotencyKey: "e2e-send-1",
  });
  assert.match(sent.messageId, /^<.+>$/);

  const arrived = await eventually("delivery to the seeded inbox", async () => {
    const { messages } = await call(client, "list_messages", { inboxId: seeded, labels: ["unread"] });
    return messages.find((m) => m.messageId === sent.messageId);
  });
  const reply = await call(client, "reply", { inboxId: seeded, messageId: arrived.messageId, text: "Got it", idempotencyKey: "e2e-reply-1" });
  assert.equal(reply.threadId, arrived.threadId);

  assert.equal(await call(client, "update_message_labels", { inboxId: seeded, messageId: arrived.messageId, removeLabels: ["unread"] }), null);
  const { threads } = await call(client, "list_threads", { inboxId: seeded });
  assert.ok(threads.some((t) => t.threadId === arrived.threadId));
  const thread = await call(client, "get_thread", { inboxId: seeded, threadId: arrived.threadId, includeBodies: true });
  assert.equal(thread.messages.length, 2);
  assert.equal(await call(client, "update_thread_labels", { inboxId: seeded, threadId: arrived.threadId, addLabels: ["done"] }), null);

  // search_messages may not be built in this version; either way the API answered.
  const search = await client.callTool({ name: "search_messages", arguments: { inboxId: seeded, query: "MCP" } });
  if (search.isError) {
    const { error } = JSON.parse(search.content[0].text);
    assert.equal(typeof error.status, "number", search.content[0].text);
  } else {
    assert.ok(Array.isArray(search.structuredContent.result.messages));
  }

  assert.deepEqual(await call(client, "delete_inbox", { inboxId: inbox.inboxId }), { deleted: true });
});

test("errors carry the REST code and status", async () => {
  const notFound = await fails(client, "get_inbox", { inboxId: "nobody@inboxd.test" });
  assert.equal(notFound.code, "not_found");
  assert.equal(notFound.status, 404);
  assert.equal(notFound.transient, false);
  const invalid = await fails(client, "list_messages", { inboxId: seeded, limit: 1000 });
  assert.equal(invalid.code, "invalid_argument");
  assert.equal(invalid.status, 422);
  assert.match(invalid.message, /^limit/);
});

test("stdio: `inboxd mcp` lists every tool and proxies calls to the server", async () => {
  const stdio = new Client({ name: "inboxd-e2e-stdio", version: "1.0.0" });
  await stdio.connect(new StdioClientTransport({
    command: binary,
    args: ["mcp", "--base-url", base],
    env: { ...process.env, INBOXD_API_KEY: readOnlyKey },
    stderr: "inherit",
  }));
  try {
    assert.equal(stdio.getServerVersion().name, "inboxd");
    const { tools } = await stdio.listTools();
    assert.equal(tools.length, 18); // stdio lists all; the API refuses what the key may not do
    assert.equal((await call(stdio, "get_inbox", { inboxId: seeded })).inboxId, seeded);
    const refused = await fails(stdio, "send", { inboxId: seeded, to: [seeded], text: "x", idempotencyKey: "e2e-stdio-1" });
    assert.equal(refused.code, "forbidden");
    assert.equal(refused.status, 403);
  } finally {
    await stdio.close();
  }
});
