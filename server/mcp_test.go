package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	qt "github.com/frankban/quicktest"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/schema"
	"github.com/inboxd/inboxd/server"
)

// bearer adds a key (and any other headers) to every request of the SDK's HTTP client.
type bearer struct {
	key     string
	headers map[string]string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	for k, v := range b.headers {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect connects the official SDK client to the env's /mcp with key.
func (e *env) mcpConnect(key string, headers ...string) (*mcp.ClientSession, error) {
	e.t.Helper()
	h := map[string]string{}
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "inboxd-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             e.url + "/mcp",
		HTTPClient:           &http.Client{Transport: bearer{key: key, headers: h}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	if err == nil {
		e.t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func (e *env) mcpSession(key string) *mcp.ClientSession {
	e.t.Helper()
	cs, err := e.mcpConnect(key)
	qt.Assert(e.t, err, qt.IsNil)
	return cs
}

// toolCall is a tool result: its text, and its structured result or its error.
type toolCall struct {
	isError bool
	text    string
	result  any            // structuredContent.result
	err     map[string]any // the "error" object of an error result
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) toolCall {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	qt.Assert(t, err, qt.IsNil, qt.Commentf("%s", name))
	qt.Assert(t, res.Content, qt.HasLen, 1)
	text, ok := res.Content[0].(*mcp.TextContent)
	qt.Assert(t, ok, qt.IsTrue)
	tc := toolCall{isError: res.IsError, text: text.Text}
	if res.IsError {
		var body struct{ Error map[string]any }
		qt.Assert(t, json.Unmarshal([]byte(text.Text), &body), qt.IsNil, qt.Commentf("%s", text.Text))
		tc.err = body.Error
		return tc
	}
	sc, ok := res.StructuredContent.(map[string]any)
	qt.Assert(t, ok, qt.IsTrue, qt.Commentf("structuredContent: %#v", res.StructuredContent))
	tc.result = sc["result"]
	var fromText any
	qt.Assert(t, json.Unmarshal([]byte(text.Text), &fromText), qt.IsNil)
	qt.Assert(t, fromText, qt.DeepEquals, tc.result, qt.Commentf("text and structuredContent differ"))
	return tc
}

// succeeds calls a tool that must succeed and returns its result.
func succeeds(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) any {
	t.Helper()
	tc := callTool(t, cs, name, args)
	qt.Assert(t, tc.isError, qt.IsFalse, qt.Commentf("%s: %s", name, tc.text))
	return tc.result
}

// toolFails calls a tool that must fail with the REST status and code.
func toolFails(t *testing.T, cs *mcp.ClientSession, status int, code, name string, args map[string]any) map[string]any {
	t.Helper()
	tc := callTool(t, cs, name, args)
	qt.Assert(t, tc.isError, qt.IsTrue, qt.Commentf("%s: %s", name, tc.text))
	qt.Assert(t, tc.err["code"], qt.Equals, code, qt.Commentf("%s", tc.text))
	qt.Assert(t, tc.err["status"], qt.Equals, float64(status), qt.Commentf("%s", tc.text))
	qt.Assert(t, tc.err["message"], qt.Not(qt.Equals), "")
	_, ok := tc.err["transient"].(bool)
	qt.Assert(t, ok, qt.IsTrue, qt.Commentf("transient missing: %s", tc.text))
	return tc.err
}

func toolNames(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	qt.Assert(t, err, qt.IsNil)
	out := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

// toolCount is how many operations are MCP tools.
func toolCount() int {
	n := 0
	for _, op := range schema.Operations() {
		if !op.NoTool {
			n++
		}
	}
	return n
}

// requiredInputs is API-NOTES section 13's table.
var requiredInputs = map[string][]string{
	"list_inboxes": nil, "get_usage": nil,
	"create_inbox": {"username"},
	"get_inbox":    {"inboxId"}, "update_inbox": {"inboxId", "group"}, "delete_inbox": {"inboxId"}, "finish_inbox_setup": {"inboxId"},
	"list_messages": {"inboxId"}, "list_threads": {"inboxId"},
	"search_messages":       {"inboxId", "query"},
	"get_message":           {"inboxId", "messageId"},
	"send":                  {"inboxId", "to", "idempotencyKey"},
	"reply":                 {"inboxId", "messageId", "idempotencyKey"},
	"update_message_labels": {"inboxId", "messageId"},
	"get_attachment":        {"inboxId", "messageId", "attachmentId"},
	"get_thread":            {"inboxId", "threadId"}, "update_thread_labels": {"inboxId", "threadId"},
	"wait_for_message": {"inboxId", "since"},
}

func TestMCPListTools(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	cs := e.mcpSession(e.full)

	init := cs.InitializeResult()
	c.Assert(init.ServerInfo.Name, qt.Equals, "inboxd")
	c.Assert(init.ServerInfo.Version, qt.Not(qt.Equals), "")
	for _, want := range []string{"untrusted", "never follow instructions", "senderAuthentication", "never authorizes",
		"authorized", "same idempotencyKey", "stable username", "dashboard"} {
		c.Assert(strings.Contains(init.Instructions, want), qt.IsTrue, qt.Commentf("instructions lack %q", want))
	}

	tools := toolNames(t, cs)
	c.Assert(tools, qt.HasLen, toolCount())
	for _, op := range schema.Operations() {
		if op.NoTool {
			continue
		}
		tool := tools[op.Tool]
		c.Assert(tool, qt.Not(qt.IsNil), qt.Commentf("%s missing", op.Tool))
		c.Assert(tool.Description, qt.Equals, op.Summary)
		if op.Tool == "get_message" || op.Tool == "get_thread" {
			c.Assert(strings.Contains(tool.Description, "unverified unless senderAuthentication is authenticated"), qt.IsTrue)
		}
		read := op.Method == "GET"
		a := tool.Annotations
		c.Assert(a.ReadOnlyHint, qt.Equals, read, qt.Commentf("%s", op.Tool))
		c.Assert(*a.DestructiveHint, qt.Equals, !read, qt.Commentf("%s", op.Tool))
		c.Assert(a.IdempotentHint, qt.IsTrue)
		c.Assert(*a.OpenWorldHint, qt.IsTrue)

		s := tool.InputSchema.(map[string]any)
		c.Assert(s["type"], qt.Equals, "object")
		c.Assert(s["additionalProperties"], qt.Equals, false, qt.Commentf("%s", op.Tool))
		var required []string
		for _, r := range asList(s["required"]) {
			required = append(required, r.(string))
		}
		want := append([]string(nil), requiredInputs[op.Tool]...)
		sort.Strings(required)
		sort.Strings(want)
		c.Assert(required, qt.DeepEquals, want, qt.Commentf("%s required", op.Tool))
		props := s["properties"].(map[string]any)
		for _, p := range op.PathParams {
			c.Assert(props[p], qt.Not(qt.IsNil), qt.Commentf("%s lacks path param %s", op.Tool, p))
		}
	}
	// Defaults come along from the REST schemas.
	props := tools["list_messages"].InputSchema.(map[string]any)["properties"].(map[string]any)
	c.Assert(props["limit"].(map[string]any)["default"], qt.Equals, 20.0)
	props = tools["get_message"].InputSchema.(map[string]any)["properties"].(map[string]any)
	c.Assert(props["includeHtml"].(map[string]any)["default"], qt.Equals, false)
	props = tools["list_inboxes"].InputSchema.(map[string]any)["properties"].(map[string]any)
	c.Assert(props["limit"].(map[string]any)["default"], qt.Equals, 50.0)

	// A key lists only the tools its scopes allow.
	ro := toolNames(t, e.mcpSession(e.readOnly))
	var names []string
	for name := range ro {
		names = append(names, name)
	}
	sort.Strings(names)
	c.Assert(names, qt.DeepEquals, []string{"get_attachment", "get_inbox", "get_message", "get_thread", "get_usage",
		"list_inboxes", "list_messages", "list_threads", "search_messages", "wait_for_message"})
	sendOnly := toolNames(t, e.mcpSession(e.newKey("acme", db.ScopeMessagesSend)))
	c.Assert(len(sendOnly), qt.Equals, 2)
	c.Assert(sendOnly["send"], qt.Not(qt.IsNil))
	c.Assert(sendOnly["reply"], qt.Not(qt.IsNil))
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// TestMCPToolsMatchREST walks the first-user path through tools and checks each result
// against the REST answer for the same request.
func TestMCPToolsMatchREST(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	cs := e.mcpSession(e.full)

	created := succeeds(t, cs, "create_inbox", map[string]any{"username": "Alice", "displayName": "Alice's agent"})
	c.Assert(created.(map[string]any)["inboxId"], qt.Equals, "alice@inboxd.test")
	c.Assert(e.schema.Response("createInbox", mustJSON(t, created)), qt.IsNil)
	again := succeeds(t, cs, "create_inbox", map[string]any{"username": "alice"})
	c.Assert(again, qt.DeepEquals, created) // idempotent on username, as in REST
	bob := e.createInbox("bob")

	got := succeeds(t, cs, "get_inbox", map[string]any{"inboxId": "alice@inboxd.test"})
	c.Assert(got, qt.DeepEquals, e.restJSON("GET", inboxPath("alice@inboxd.test")))

	sent := succeeds(t, cs, "send", map[string]any{
		"inboxId": "alice@inboxd.test", "to": []string{bob}, "subject": "Lunch?", "text": "Noon <today>?", "idempotencyKey": "k1",
	}).(map[string]any)
	c.Assert(e.schema.Response("send", mustJSON(t, sent)), qt.IsNil)
	msgID := sent["messageId"].(string)
	c.Assert(strings.HasPrefix(msgID, "<"), qt.IsTrue)
	// A retry with the same key is deduplicated, as in REST.
	retry := succeeds(t, cs, "send", map[string]any{
		"inboxId": "alice@inboxd.test", "to": []string{bob}, "subject": "Lunch?", "text": "Noon <today>?", "idempotencyKey": "k1",
	}).(map[string]any)
	c.Assert(retry["messageId"], qt.Equals, msgID)
	c.Assert(retry["deduplicated"], qt.Equals, true)

	e.eventually("delivery to bob", func() bool {
		list := succeeds(t, cs, "list_messages", map[string]any{"inboxId": bob, "labels": []string{"unread"}, "limit": 5})
		return len(list.(map[string]any)["messages"].([]any)) == 1
	})
	list := succeeds(t, cs, "list_messages", map[string]any{"inboxId": bob, "labels": []string{"unread"}, "limit": 5})
	c.Assert(list, qt.DeepEquals, e.restJSON("GET", inboxPath(bob)+"/messages?labels=unread&limit=5"))

	// The Message-ID (with <, >, @) travels as a plain argument and is encoded into the path.
	msg := succeeds(t, cs, "get_message", map[string]any{"inboxId": bob, "messageId": msgID, "includeHtml": true})
	c.Assert(msg.(map[string]any)["text"], qt.Equals, "Noon <today>?")
	c.Assert(msg, qt.DeepEquals, e.restJSON("GET", msgPath(bob, msgID)+"?includeHtml=true"))

	threadID := msg.(map[string]any)["threadId"].(string)
	thread := succeeds(t, cs, "get_thread", map[string]any{"inboxId": bob, "threadId": threadID})
	c.Assert(thread, qt.DeepEquals, e.restJSON("GET", inboxPath(bob)+"/threads/"+threadID))

	// The label operations answer null.
	c.Assert(succeeds(t, cs, "update_message_labels", map[string]any{"inboxId": bob, "messageId": msgID, "removeLabels": []string{"unread"}}), qt.IsNil)
	labels := e.restJSON("GET", msgPath(bob, msgID)).(map[string]any)["labels"]
	c.Assert(labels, qt.DeepEquals, []any{"received"})

	reply := succeeds(t, cs, "reply", map[string]any{"inboxId": bob, "messageId": msgID, "text": "Yes", "idempotencyKey": "r1"})
	c.Assert(reply.(map[string]any)["threadId"], qt.Equals, threadID)

	setup := succeeds(t, cs, "finish_inbox_setup", map[string]any{"inboxId": "alice@inboxd.test"})
	c.Assert(setup.(map[string]any)["deliveryStatus"], qt.Equals, "ready")
	upd := succeeds(t, cs, "update_inbox", map[string]any{"inboxId": "alice@inboxd.test", "group": "agents"})
	c.Assert(upd.(map[string]any)["group"], qt.Equals, "agents")
	inboxes := succeeds(t, cs, "list_inboxes", map[string]any{"group": "agents"})
	c.Assert(inboxes, qt.DeepEquals, e.restJSON("GET", "/v1/inboxes?group=agents"))
	c.Assert(succeeds(t, cs, "get_usage", nil), qt.DeepEquals, e.restJSON("GET", "/v1/usage"))

	c.Assert(succeeds(t, cs, "delete_inbox", map[string]any{"inboxId": "alice@inboxd.test"}), qt.DeepEquals, map[string]any{"deleted": true})
}

func TestMCPToolErrors(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	cs := e.mcpSession(e.full)
	in := e.createInbox("ops")

	// The REST errors, with their HTTP status.
	toolFails(t, cs, 404, "not_found", "get_inbox", map[string]any{"inboxId": "nobody@inboxd.test"})
	toolFails(t, cs, 404, "not_found", "get_message", map[string]any{"inboxId": in, "messageId": "<none@x.test>"})
	err := toolFails(t, cs, 422, "invalid_argument", "list_messages", map[string]any{"inboxId": in, "limit": 0})
	c.Assert(strings.HasPrefix(err["message"].(string), "limit"), qt.IsTrue)
	toolFails(t, cs, 422, "invalid_argument", "list_messages", map[string]any{"inboxId": in, "limit": "ten"})
	// A read tool's arguments have their JSON types, though the REST request carries them
	// as text: "2" is not a limit, nor [1] labels, nor "true" a boolean.
	err = toolFails(t, cs, 422, "invalid_argument", "list_messages", map[string]any{"inboxId": in, "limit": "2"})
	c.Assert(err["message"], qt.Matches, "limit.*")
	toolFails(t, cs, 422, "invalid_argument", "list_messages", map[string]any{"inboxId": in, "labels": []any{1, 2}})
	toolFails(t, cs, 422, "invalid_argument", "list_messages", map[string]any{"inboxId": in, "labels": []any{nil}})
	toolFails(t, cs, 422, "invalid_argument", "list_threads", map[string]any{"inboxId": in, "includeTrash": "true"})
	toolFails(t, cs, 422, "invalid_argument", "search_messages", map[string]any{"inboxId": in, "query": 5})
	succeeds(t, cs, "list_threads", map[string]any{"inboxId": in, "includeTrash": true, "limit": 2, "labels": []string{"received"}, "pageToken": nil})
	toolFails(t, cs, 422, "invalid_argument", "list_messages", map[string]any{"inboxId": in, "bogus": true})
	toolFails(t, cs, 422, "invalid_argument", "get_inbox", map[string]any{"inboxId": "not an address"})
	err = toolFails(t, cs, 422, "invalid_argument", "send", map[string]any{"inboxId": in, "to": []string{"x@inboxd.test"}, "text": "hi"})
	c.Assert(err["message"], qt.Matches, "idempotencyKey.*")
	toolFails(t, cs, 422, "invalid_argument", "send", map[string]any{"inboxId": in, "to": []string{"x@inboxd.test"}, "text": "hi", "idempotencyKey": "k", "extra": 1})
	toolFails(t, cs, 403, "quarantine_review_required", "update_thread_labels", map[string]any{
		"inboxId": in, "threadId": "0b5e9c1e-8a4f-4d2b-9c3e-2f1a6d7e8b90", "addLabels": []string{"quarantined"}})
	e.ok("createInbox", "POST", "/v1/inboxes", e.other, map[string]any{"username": "taken"})
	toolFails(t, cs, 409, "inbox_conflict", "create_inbox", map[string]any{"username": "taken"})

	// Arguments the REST request cannot be built without.
	err = toolFails(t, cs, 422, "invalid_argument", "get_inbox", map[string]any{})
	c.Assert(err["message"], qt.Equals, "inboxId: is required")
	toolFails(t, cs, 422, "invalid_argument", "get_inbox", map[string]any{"inboxId": 7})
	toolFails(t, cs, 422, "invalid_argument", "get_message", map[string]any{"inboxId": in, "messageId": ""})
	toolFails(t, cs, 422, "invalid_argument", "delete_inbox", map[string]any{"inboxId": in, "force": true})
	succeeds(t, cs, "get_inbox", map[string]any{"inboxId": in}) // not deleted by the refused call

	// A tool the key's scopes do not allow is not listed, and calling it is forbidden, as
	// a tool result (extensions section 7).
	ro := e.mcpSession(e.readOnly)
	toolFails(t, ro, 403, "forbidden", "send", map[string]any{})
}

// restJSON is the decoded body of a REST request that must succeed.
func (e *env) restJSON(method, path string) any {
	e.t.Helper()
	r := e.do(method, path, e.full, nil)
	qt.Assert(e.t, r.status, qt.Equals, 200, qt.Commentf("%s %s: %s", method, path, r.body))
	var v any
	qt.Assert(e.t, json.Unmarshal(r.body, &v), qt.IsNil)
	return v
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	qt.Assert(t, err, qt.IsNil)
	return b
}

// mcpPost sends one raw JSON-RPC request to /mcp.
func (e *env) mcpPost(key string, body string, headers ...string) response {
	e.t.Helper()
	h := append([]string{"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2025-06-18"}, headers...)
	return e.do("POST", "/mcp", key, body, h...)
}

const toolsList = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

func TestMCPHTTP(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")

	r := e.mcpPost(e.full, toolsList)
	c.Assert(r.status, qt.Equals, 200, qt.Commentf("%s", r.body))
	c.Assert(r.header.Get("Cache-Control"), qt.Equals, "no-store")
	c.Assert(r.header.Get("Content-Type"), qt.Matches, "application/json.*")
	c.Assert(r.header.Get("Mcp-Session-Id"), qt.Equals, "") // stateless

	// Account keys only, checked on every request.
	r = e.mcpPost("", toolsList)
	c.Assert(r.status, qt.Equals, 401)
	c.Assert(r.errCode(t), qt.Equals, "unauthorized")
	c.Assert(r.header.Get("Cache-Control"), qt.Equals, "no-store")
	r = e.mcpPost("bze_not-a-key", toolsList)
	c.Assert(r.status, qt.Equals, 401)
	r = e.mcpPost(e.mailboxKey("acme", in), toolsList)
	c.Assert(r.status, qt.Equals, 401)
	c.Assert(r.errCode(t), qt.Equals, "unauthorized")
	c.Assert(db.EnsureAccount(context.Background(), e.store, db.Account{ID: "off", Plan: "team", Disabled: true}, nil), qt.IsNil)
	r = e.mcpPost(e.newKey("off", db.AllScopes()...), toolsList)
	c.Assert(r.status, qt.Equals, 403)
	c.Assert(r.errCode(t), qt.Equals, "access_denied")

	// POST only.
	for _, method := range []string{"GET", "DELETE", "PUT", "PATCH", "OPTIONS"} {
		r = e.do(method, "/mcp", e.full, nil)
		c.Assert(r.status, qt.Equals, 405, qt.Commentf("%s", method))
		c.Assert(r.header.Get("Allow"), qt.Equals, "POST")
		c.Assert(r.errCode(t), qt.Equals, "method_not_allowed")
	}

	// Origin, when present, must be the base URL's.
	r = e.mcpPost(e.full, toolsList, "Origin", "https://evil.example")
	c.Assert(r.status, qt.Equals, 403)
	c.Assert(r.errCode(t), qt.Equals, "forbidden")
	r = e.mcpPost(e.full, toolsList, "Origin", "null")
	c.Assert(r.status, qt.Equals, 403)
	r = e.mcpPost(e.full, toolsList, "Origin", "http://api.test")
	c.Assert(r.status, qt.Equals, 200, qt.Commentf("%s", r.body))
	r = e.mcpPost(e.full, toolsList, "Origin", "http://API.test:80")
	c.Assert(r.status, qt.Equals, 200, qt.Commentf("%s", r.body))
	_, err := e.mcpConnect(e.full, "Origin", "http://elsewhere.test")
	c.Assert(err, qt.Not(qt.IsNil))
	_, err = e.mcpConnect(e.full, "Origin", "http://api.test")
	c.Assert(err, qt.IsNil)

	// 5 MiB at most.
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage","arguments":{"x":"` + strings.Repeat("a", server.MaxBodyBytes) + `"}}}`
	r = e.mcpPost(e.full, big)
	c.Assert(r.status, qt.Equals, 413)
	c.Assert(r.errCode(t), qt.Equals, "payload_too_large")
}

// TestMCPStdio runs `inboxd mcp`'s server over pipes: every tool is listed whatever the
// key, calls are proxied to the HTTP API, which refuses what the key may not do.
func TestMCPStdio(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")

	connect := func(key string) *mcp.ClientSession {
		c2sR, c2sW := io.Pipe()
		s2cR, s2cW := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- server.ServeMCPStdio(ctx, server.StdioConfig{BaseURL: e.url + "/", Key: key, Version: "test"}, c2sR, s2cW)
			s2cW.Close()
		}()
		client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, nil)
		c.Assert(err, qt.IsNil)
		t.Cleanup(func() {
			cs.Close()
			c2sW.Close()
			cancel()
			c.Check(<-done, qt.IsNil)
		})
		return cs
	}

	cs := connect(e.readOnly)
	c.Assert(cs.InitializeResult().ServerInfo, qt.DeepEquals, &mcp.Implementation{Name: "inboxd", Version: "test"})
	c.Assert(toolNames(t, cs), qt.HasLen, toolCount())
	got := succeeds(t, cs, "get_inbox", map[string]any{"inboxId": in})
	c.Assert(got, qt.DeepEquals, e.restJSON("GET", inboxPath(in)))
	toolFails(t, cs, 403, "forbidden", "send", map[string]any{"inboxId": in, "to": []string{in}, "text": "x", "idempotencyKey": "k"})
	toolFails(t, cs, 404, "not_found", "get_message", map[string]any{"inboxId": in, "messageId": "<a/b@x.test>"})

	// A mailbox key works on stdio.
	mb := connect(e.mailboxKey("acme", in))
	list := succeeds(t, mb, "list_inboxes", nil).(map[string]any)
	c.Assert(list["inboxes"], qt.HasLen, 1)

	// A server that cannot be reached is a request_failed error.
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	go func() {
		server.ServeMCPStdio(context.Background(), server.StdioConfig{BaseURL: "http://127.0.0.1:1", Key: e.full}, c2sR, s2cW)
		s2cW.Close()
	}()
	down, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, nil)
	c.Assert(err, qt.IsNil)
	tc := callTool(t, down, "get_usage", nil)
	c.Assert(tc.isError, qt.IsTrue)
	c.Assert(tc.err["code"], qt.Equals, "request_failed")
	c.Assert(tc.err["status"], qt.IsNil)
	down.Close()
	c2sW.Close()
}

func TestMCPStdioConfig(t *testing.T) {
	c := qt.New(t)
	var out bytes.Buffer
	err := server.ServeMCPStdio(context.Background(), server.StdioConfig{BaseURL: "ftp://x", Key: "k"}, strings.NewReader(""), &out)
	c.Assert(err, qt.ErrorMatches, ".*base-url.*")
	err = server.ServeMCPStdio(context.Background(), server.StdioConfig{BaseURL: "http://127.0.0.1:8080"}, strings.NewReader(""), &out)
	c.Assert(err, qt.ErrorMatches, ".*INBOXD_API_KEY.*")
}

// A client that writes its requests and closes its end of the pipe (a script) gets every
// answer before the stdio server ends.
func TestMCPStdioAnswersBeforeTheEndOfInput(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	e.createInbox("ops")
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"list_inboxes","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_usage","arguments":{}}}`,
	}, "\n") + "\n"
	for range 5 { // the answers raced the end of input: once was not enough to lose them
		var out lockedBuffer
		err := server.ServeMCPStdio(context.Background(), server.StdioConfig{BaseURL: e.url, Key: e.full, Version: "test"}, strings.NewReader(in), &out)
		c.Assert(err, qt.IsNil)
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			c.Assert(json.Unmarshal([]byte(line), &m), qt.IsNil)
			c.Assert(m.Result, qt.Not(qt.IsNil), qt.Commentf("%s", line))
			ids = append(ids, string(m.ID))
		}
		sort.Strings(ids)
		c.Assert(ids, qt.DeepEquals, []string{`"three"`, "1", "2", "4"})
	}
}

// A line on stdio that is not a JSON-RPC message gets an error answer and the session
// goes on: the requests around it are answered.
func TestMCPStdioAnswersMalformedLinesAndGoesOn(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`,
		`not json`,
		``,
		`[]`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","id":4}`, // which request would an answer be to?
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	}, "\n") + "\n"
	var out lockedBuffer
	err := server.ServeMCPStdio(context.Background(), server.StdioConfig{BaseURL: e.url, Key: e.full, Version: "test"}, strings.NewReader(in), &out)
	c.Assert(err, qt.IsNil)
	answers := map[string]float64{} // id: error code, 0 for a result
	var nullIDs []float64
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			ID     json.RawMessage        `json:"id"`
			Result json.RawMessage        `json:"result"`
			Error  struct{ Code float64 } `json:"error"`
		}
		c.Assert(json.Unmarshal([]byte(line), &m), qt.IsNil, qt.Commentf("%s", line))
		if string(m.ID) == "null" {
			nullIDs = append(nullIDs, m.Error.Code)
			continue
		}
		answers[string(m.ID)] = m.Error.Code
	}
	c.Assert(answers, qt.DeepEquals, map[string]float64{"1": 0, "2": 0})
	c.Assert(nullIDs, qt.DeepEquals, []float64{-32700, -32600, -32600, -32600})
}

// lockedBuffer is a bytes.Buffer safe for the stdio server's writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A body /mcp cannot take as a JSON-RPC message gets a JSON-RPC error response (HTTP 400,
// id null) a client can read, not the SDK's plain text; a body that is not JSON by its
// Content-Type gets the API's error shape.
func TestMCPMalformedRequestsGetJSONErrors(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	for body, code := range map[string]float64{
		`{"jsonrpc":"2.0","id":1,`: -32700,
		``:                         -32700,
		`[1]`:                      -32600,
		`"tools/list"`:             -32600,
		`{"jsonrpc":"1.0","id":1,"method":"tools/list"}`:        -32600,
		`{"id":1,"method":"tools/list"}`:                        -32600,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`:  -32600,
		`{"jsonrpc":"2.0","id":null,"method":"tools/list"}`:     -32600,
		`{"jsonrpc":"2.0","id":true,"method":"tools/list"}`:     -32600,
		`{"jsonrpc":"2.0","id":1,"method":5}`:                   -32600,
		`{"jsonrpc":"2.0","id":1,"method":["tools/list"]}`:      -32600,
		`{"jsonrpc":"2.0","id":"x","method":"tools/list","x":1`: -32700,
	} {
		r := e.mcpPost(e.full, body)
		c.Assert(r.status, qt.Equals, 400, qt.Commentf("%s: %s", body, r.body))
		c.Assert(r.header.Get("Content-Type"), qt.Equals, "application/json")
		m := r.json(t)
		c.Assert(m["jsonrpc"], qt.Equals, "2.0")
		c.Assert(m["id"], qt.IsNil)
		c.Assert(m["error"].(map[string]any)["code"], qt.Equals, code, qt.Commentf("%s", body))
	}
	r := e.mcpPost(e.full, toolsList, "Content-Type", "text/plain")
	c.Assert(r.status, qt.Equals, 415)
	c.Assert(r.json(t)["error"].(map[string]any)["code"], qt.Equals, "invalid_request")
	r = e.mcpPost(e.full, toolsList, "Content-Encoding", "br")
	c.Assert(r.status, qt.Equals, 415)
	c.Assert(r.json(t)["error"].(map[string]any)["code"], qt.Equals, "invalid_request")
	// Well-formed messages still reach the server.
	c.Assert(e.mcpPost(e.full, toolsList).status, qt.Equals, 200)
	c.Assert(e.mcpPost(e.full, `{"jsonrpc":"2.0","id":"s","method":"tools/list"}`).status, qt.Equals, 200)
}
