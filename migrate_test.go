package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db/postgres"
	"github.com/inboxd/inboxd/db/postgres/pgtest"
	"github.com/inboxd/inboxd/db/sqlite"
)

const migrateSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// migrateFixture seeds an account with a key of every scope, two inboxes and a webhook to
// hook.
func migrateFixture(t *testing.T, dir, hook string) string {
	t.Helper()
	path := filepath.Join(dir, "fixture.json")
	fixture := `{"accounts": [{"id": "crash", "plan": "exempt",
		"keys": [{"token": "` + crashKey + `", "scopes": ["inboxes:read", "inboxes:write", "messages:read", "messages:send", "messages:write"]}],
		"inboxes": [{"address": "sink@{domain}"}, {"address": "agent@{domain}"}],
		"webhooks": [{"url": "` + hook + `", "secret": "` + migrateSecret + `", "eventTypes": ["email.received"]}]}]}`
	qt.Assert(t, os.WriteFile(path, []byte(fixture), 0o644), qt.IsNil)
	return path
}

// call sends one request with key and returns the answer.
func call(t *testing.T, base, key, method, path string, body any) (int, []byte) {
	t.Helper()
	req, err := apiRequest(base, key, method, path, body)
	qt.Assert(t, err, qt.IsNil)
	res, err := http.DefaultClient.Do(req)
	qt.Assert(t, err, qt.IsNil)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// hookReceiver records the webhook deliveries it is sent.
type hookReceiver struct {
	srv *httptest.Server
	got chan http.Header
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{got: make(chan http.Header, 16)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hd := r.Header.Clone()
		hd.Set("X-Body", string(b))
		h.got <- hd
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// next waits for a delivery and checks it is signed with migrateSecret.
func (h *hookReceiver) next(t *testing.T) {
	t.Helper()
	select {
	case d := <-h.got:
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(migrateSecret, "whsec_"))
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(d.Get("webhook-id") + "." + d.Get("webhook-timestamp") + "." + d.Get("X-Body")))
		qt.Assert(t, d.Get("webhook-signature"), qt.Equals, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	case <-time.After(15 * time.Second):
		t.Fatal("no webhook delivery")
	}
}

// mailWithAttachment is a multipart message with an attachment of content.
func mailWithAttachment(id, subject string, content []byte) string {
	return "From: Ann <ann@customer.example>\r\nTo: sink@inboxd.test\r\nSubject: " + subject + "\r\nMessage-ID: " + id +
		"\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain\r\n\r\nThe quarterly rutabaga figures are attached.\r\n" +
		"--b1\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"figures.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		wrapLines(base64.StdEncoding.EncodeToString(content), 76) + "--b1--\r\n"
}

// wrapLines cuts s into lines of n characters (SMTP limits the length of a line).
func wrapLines(s string, n int) string {
	var b strings.Builder
	for len(s) > 0 {
		k := min(n, len(s))
		b.WriteString(s[:k] + "\r\n")
		s = s[k:]
	}
	return b.String()
}

// runInboxd runs a command of the binary and returns its exit status and output.
func runInboxd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(inboxdBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	qt.Assert(t, err, qt.IsNil)
	return 0, stdout.String(), stderr.String()
}

// A server on the PostgreSQL database an SQLite file was migrated to answers as the file
// did: the same pages, messages, attachments (by old links too), raw bytes, keys,
// idempotent replays, webhooks with their secret, a retired address still refused, and
// search finds the mail once the new process has built its index.
func TestMigrateFromSQLiteOnPostgres(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	pgURL := pgtest.NewEmptyDatabase(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "inboxd.db")
	hook := newHookReceiver(t)
	p := startInboxd(t, inboxdBinary(t), "--db", dbPath, "--seed", migrateFixture(t, dir, hook.srv.URL+"/in"), "--webhook-allow-http")

	// Mail over SMTP: one with an attachment of several chunks, one small.
	big := make([]byte, 700<<10)
	rand.Read(big)
	c.Assert(smtp.SendMail(p.smtp, nil, "ann@customer.example", []string{"sink@inboxd.test"},
		[]byte(mailWithAttachment("<rutabaga-1@customer.example>", "Rutabaga figures", big))), qt.IsNil)
	c.Assert(smtp.SendMail(p.smtp, nil, "ann@customer.example", []string{"sink@inboxd.test"},
		[]byte("From: ann@customer.example\r\nTo: sink@inboxd.test\r\nSubject: Short note\r\nMessage-ID: <note-1@customer.example>\r\n\r\nSee you.\r\n")), qt.IsNil)
	hook.next(t)
	hook.next(t)

	sink, agent := "/v1/inboxes/sink%40inboxd.test", "/v1/inboxes/agent%40inboxd.test"
	sendBody := map[string]any{"to": []string{"sink@inboxd.test"}, "subject": "Turnip order", "text": "Two crates.", "idempotencyKey": "order-1"}
	status, body := call(t, p.api, crashKey, "POST", agent+"/messages/send", sendBody)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	status, body = call(t, p.api, crashKey, "PATCH", sink+"/messages/"+url.PathEscape("<note-1@customer.example>")+"/labels",
		map[string]any{"addLabels": []string{"vip", "later"}})
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	status, body = call(t, p.api, crashKey, "POST", "/v1/inboxes", map[string]any{"username": "gone"})
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	status, body = call(t, p.api, crashKey, "DELETE", "/v1/inboxes/gone%40inboxd.test", nil)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	code, mailboxKey, stderr := runInboxd(t, "keys", "create", "--db", dbPath, "--account", "crash", "--inbox", "agent@inboxd.test")
	c.Assert(code, qt.Equals, 0, qt.Commentf("%s", stderr))
	mailboxKey = strings.TrimSpace(mailboxKey)

	// What a user sees on SQLite, to be seen again on PostgreSQL.
	var page struct {
		Messages []struct {
			MessageID   string
			Attachments []struct{ AttachmentID string }
		}
		NextPageToken string
	}
	status, body = call(t, p.api, crashKey, "GET", sink+"/messages?limit=1", nil)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	c.Assert(json.Unmarshal(body, &page), qt.IsNil)
	c.Assert(page.NextPageToken, qt.Not(qt.Equals), "")
	bigPath := sink + "/messages/" + url.PathEscape("<rutabaga-1@customer.example>")
	views := []string{"/v1/inboxes", sink + "/messages", agent + "/messages", sink + "/threads", "/v1/webhooks", "/v1/usage",
		sink + "/messages?limit=1&pageToken=" + url.QueryEscape(page.NextPageToken),
		bigPath, bigPath + "?includeHtml=true", sink + "/messages/" + url.PathEscape("<note-1@customer.example>"),
		"/v1/inboxes/gone%40inboxd.test"}
	var threads struct{ Threads []struct{ ThreadID string } }
	_, body = call(t, p.api, crashKey, "GET", sink+"/threads", nil)
	c.Assert(json.Unmarshal(body, &threads), qt.IsNil)
	for _, th := range threads.Threads {
		views = append(views, sink+"/threads/"+th.ThreadID+"?includeBodies=true")
	}
	var hooks struct{ Webhooks []struct{ WebhookID string } }
	_, body = call(t, p.api, crashKey, "GET", "/v1/webhooks", nil)
	c.Assert(json.Unmarshal(body, &hooks), qt.IsNil)
	c.Assert(hooks.Webhooks, qt.HasLen, 1)
	views = append(views, "/v1/webhooks/"+hooks.Webhooks[0].WebhookID+"/deliveries")
	before := map[string]string{}
	for _, v := range views {
		status, body := call(t, p.api, crashKey, "GET", v, nil)
		before[v] = fmt.Sprintf("%d %s", status, body)
	}
	status, body = call(t, p.api, mailboxKey, "GET", agent+"/messages", nil)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	mailboxView := string(body)
	_, replay := call(t, p.api, crashKey, "POST", agent+"/messages/send", sendBody)
	retiredStatus, retired := call(t, p.api, crashKey, "POST", "/v1/inboxes", map[string]any{"username": "gone"})
	c.Assert(retiredStatus, qt.Not(qt.Equals), 200)
	_, body = call(t, p.api, crashKey, "GET", bigPath, nil)
	var bigMsg struct {
		Attachments []struct{ AttachmentID string }
	}
	c.Assert(json.Unmarshal(body, &bigMsg), qt.IsNil)
	c.Assert(bigMsg.Attachments, qt.HasLen, 1)
	var att struct{ DownloadURL string }
	status, body = call(t, p.api, crashKey, "GET", bigPath+"/attachments/"+bigMsg.Attachments[0].AttachmentID, nil)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	c.Assert(json.Unmarshal(body, &att), qt.IsNil)
	oldLink, err := url.Parse(att.DownloadURL)
	c.Assert(err, qt.IsNil)

	c.Assert(p.cmd.Process.Signal(syscall.SIGTERM), qt.IsNil)
	p.cmd.Wait()

	code, stdout, stderr := runInboxd(t, "migrate", "--from", dbPath, "--to", pgURL)
	c.Assert(code, qt.Equals, 0, qt.Commentf("%s", stderr))
	c.Assert(stdout, qt.Matches, `(?s).*messages\s+4 rows.*`)
	c.Assert(stderr, qt.Contains, "search index")
	// The copy leaves statistics, so the first server plans for the rows it holds.
	conn, err := pgx.Connect(context.Background(), pgURL)
	c.Assert(err, qt.IsNil)
	var analyzed bool
	err = conn.QueryRow(context.Background(), "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'messages'").Scan(&analyzed)
	conn.Close(context.Background())
	c.Assert(err, qt.IsNil)
	c.Check(analyzed, qt.IsTrue, qt.Commentf("the copied tables have no statistics"))

	q := startInboxd(t, inboxdBinary(t), "--db", pgURL, "--data-dir", t.TempDir(), "--webhook-allow-http")
	for _, v := range views {
		status, body := call(t, q.api, crashKey, "GET", v, nil)
		c.Check(fmt.Sprintf("%d %s", status, body), qt.Equals, before[v], qt.Commentf("GET %s", v))
	}
	status, body = call(t, q.api, mailboxKey, "GET", agent+"/messages", nil)
	c.Check(status, qt.Equals, 200)
	c.Check(string(body), qt.Equals, mailboxView)
	_, body = call(t, q.api, crashKey, "POST", agent+"/messages/send", sendBody)
	c.Check(string(body), qt.Equals, string(replay))
	status, body = call(t, q.api, crashKey, "POST", "/v1/inboxes", map[string]any{"username": "gone"})
	c.Check(status, qt.Equals, retiredStatus)
	c.Check(string(body), qt.Equals, string(retired))

	// The old download link, signed before the move, still serves the bytes.
	status, body = call(t, q.api, "", "GET", oldLink.RequestURI(), nil)
	c.Check(status, qt.Equals, 200)
	c.Check(bytes.Equal(body, big), qt.IsTrue, qt.Commentf("%d bytes downloaded", len(body)))

	// Search finds the mail once the new process's index is built.
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, body = call(t, q.api, crashKey, "GET", sink+"/messages/search?query=rutabaga", nil)
		if status == 200 && strings.Contains(string(body), "Rutabaga figures") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Check(string(body), qt.Contains, "Rutabaga figures")

	// New rows take ids past the copied ones, and the webhook signs with its old secret.
	status, body = call(t, q.api, crashKey, "POST", agent+"/messages/send", map[string]any{
		"to": []string{"sink@inboxd.test"}, "subject": "Second order", "text": "One crate.", "idempotencyKey": "order-2"})
	c.Check(status, qt.Equals, 200, qt.Commentf("%s", body))
	status, body = call(t, q.api, crashKey, "POST", "/v1/inboxes", map[string]any{"username": "desk"})
	c.Check(status, qt.Equals, 200, qt.Commentf("%s", body))
	c.Assert(smtp.SendMail(q.smtp, nil, "ann@customer.example", []string{"sink@inboxd.test"},
		[]byte("From: ann@customer.example\r\nTo: sink@inboxd.test\r\nSubject: After the move\r\nMessage-ID: <after-1@customer.example>\r\n\r\nHi.\r\n")), qt.IsNil)
	hook.next(t)

	compareRaw(t, dbPath, pgURL)
}

// compareRaw checks that every message's raw bytes are the same in both databases.
func compareRaw(t *testing.T, dbPath, pgURL string) {
	ctx := context.Background()
	lite, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	qt.Assert(t, err, qt.IsNil)
	defer lite.Close()
	pg, err := postgres.Open(ctx, pgURL, postgres.Options{})
	qt.Assert(t, err, qt.IsNil)
	defer pg.Close()
	conn, err := pgx.Connect(ctx, pgURL)
	qt.Assert(t, err, qt.IsNil)
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, "SELECT id FROM messages WHERE message_id <> '<after-1@customer.example>' AND subject <> 'Second order'")
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, ids, qt.HasLen, 4)
	var largest int
	for _, id := range ids {
		want, err := lite.MessageRaw(ctx, id)
		qt.Assert(t, err, qt.IsNil)
		got, err := pg.MessageRaw(ctx, id)
		qt.Assert(t, err, qt.IsNil)
		qt.Check(t, bytes.Equal(got, want), qt.IsTrue, qt.Commentf("message row %d: %d bytes, want %d", id, len(got), len(want)))
		largest = max(largest, len(want))
	}
	qt.Check(t, largest > 3*(256<<10), qt.IsTrue, qt.Commentf("the largest message has %d bytes: not several chunks", largest))
}

// migrate refuses, with exit status 2 and without writing, a target that is not empty and
// a source that is not an inboxd database of this version; a copy that fails midway
// leaves the target empty.
func TestMigrateRefusalsOnPostgres(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "inboxd.db")
	fixture := filepath.Join(dir, "fixture.json")
	c.Assert(os.WriteFile(fixture, []byte(`{"accounts": [{"id": "a", "inboxes": [{"address": "x@{domain}", "messages": [
		{"messageId": "<1@x.example>", "direction": "sent", "to": ["a@b.example"], "timestamp": "2026-11-02T09:00:00Z", "text": "hello"}]}]}]}`), 0o644), qt.IsNil)
	code, _, stderr := runInboxd(t, "seed", "--db", good, fixture)
	c.Assert(code, qt.Equals, 0, qt.Commentf("%s", stderr))

	empty := pgtest.NewEmptyDatabase(t)
	tables := func() int {
		conn, err := pgx.Connect(context.Background(), empty)
		c.Assert(err, qt.IsNil)
		defer conn.Close(context.Background())
		var n int
		c.Assert(conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").Scan(&n), qt.IsNil)
		return n
	}

	code, _, stderr = runInboxd(t, "migrate", "--from", good, "--to", pgtest.NewDatabase(t))
	c.Check(code, qt.Equals, 2)
	c.Check(stderr, qt.Contains, "is not empty")

	notDB := filepath.Join(dir, "notes.txt")
	c.Assert(os.WriteFile(notDB, bytes.Repeat([]byte("not a database\n"), 100), 0o644), qt.IsNil)
	other := filepath.Join(dir, "other.db")
	withSQL(t, other, "CREATE TABLE notes (body TEXT)")
	older := filepath.Join(dir, "older.db")
	copyFile(t, good, older)
	withSQL(t, older, "PRAGMA user_version = 15")
	for _, tc := range []struct{ from, says string }{
		{filepath.Join(dir, "missing.db"), "no such file"},
		{notDB, "is not an SQLite database"},
		{other, "is not an inboxd database"},
		{older, "is at schema version 15 and this inboxd's is "},
	} {
		code, _, stderr = runInboxd(t, "migrate", "--from", tc.from, "--to", empty)
		c.Check(code, qt.Equals, 2, qt.Commentf("%s: %s", tc.from, stderr))
		c.Check(stderr, qt.Contains, tc.says)
		c.Check(tables(), qt.Equals, 0)
	}

	// A body that cannot be read stops the copy after the schema and the tables before
	// messages were written: none of it stays.
	broken := filepath.Join(dir, "broken.db")
	copyFile(t, good, broken)
	withSQL(t, broken, "UPDATE messages SET body = x'07ff'")
	code, _, stderr = runInboxd(t, "migrate", "--from", broken, "--to", empty)
	c.Check(code, qt.Equals, 1, qt.Commentf("%s", stderr))
	c.Check(stderr, qt.Contains, "copy messages")
	c.Check(tables(), qt.Equals, 0)

	code, _, stderr = runInboxd(t, "migrate", "--from", good, "--to", empty)
	c.Check(code, qt.Equals, 0, qt.Commentf("%s", stderr))
}

// withSQL runs statements on the SQLite file at path (created when missing).
func withSQL(t *testing.T, path, statements string) {
	t.Helper()
	conn, err := sql.Open("sqlite3", path)
	qt.Assert(t, err, qt.IsNil)
	defer conn.Close()
	_, err = conn.Exec(statements)
	qt.Assert(t, err, qt.IsNil)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, os.WriteFile(to, b, 0o644), qt.IsNil)
}

// Every table of the SQLite schema is copied or named as not copied (db/postgres
// import.go), so a table added to the SQLite schema is not silently left behind.
func TestMigrateCoversEverySQLiteTable(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	path := filepath.Join(t.TempDir(), "inboxd.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	c.Assert(err, qt.IsNil)
	st.Close()
	conn, err := sql.Open("sqlite3", path)
	c.Assert(err, qt.IsNil)
	defer conn.Close()
	rows, err := conn.Query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
	c.Assert(err, qt.IsNil)
	defer rows.Close()
	for rows.Next() {
		var name string
		c.Assert(rows.Scan(&name), qt.IsNil)
		c.Check(postgres.Accounted(name), qt.IsTrue, qt.Commentf("table %s of the SQLite schema is neither copied nor named as not copied (db/postgres/import.go)", name))
	}
	c.Assert(rows.Err(), qt.IsNil)

	// And the export answers every copied table in the destination's shape.
	src, err := sqlite.OpenExport(context.Background(), path)
	c.Assert(err, qt.IsNil)
	defer src.Close()
	for _, tb := range postgres.CopiedTables {
		r, err := src.CopyRows(context.Background(), tb.Name, tb.Columns, 1024)
		c.Assert(err, qt.IsNil, qt.Commentf("table %s", tb.Name))
		for r.Next() {
			vals, err := r.Values()
			c.Assert(err, qt.IsNil)
			c.Assert(vals, qt.HasLen, len(tb.Columns))
		}
		c.Assert(r.Err(), qt.IsNil)
		r.Close()
	}
}
