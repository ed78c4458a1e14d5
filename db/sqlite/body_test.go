package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inboxd/inboxd/db"

	qt "github.com/frankban/quicktest"
	"github.com/klauspost/compress/zstd"
)

func TestPackedBodiesRoundTrip(t *testing.T) {
	big := []byte(strings.Repeat("attachment bytes, base64 and all\r\n", 4000)) // past splitAbove
	for _, tc := range []struct {
		name       string
		text, html string
		raw        []byte
	}{
		{"empty", "", "", nil},
		{"tiny", "hi", "", []byte("Subject: x\r\n\r\nhi\r\n")},
		{"typical", strings.Repeat("Thanks for the order, it ships tomorrow. ", 50), "<p>html</p>",
			[]byte("Subject: order\r\n\r\n" + strings.Repeat("Thanks for the order, it ships tomorrow. ", 50))},
		{"large raw", "see attached", "", big},
		{"no raw", strings.Repeat("é", 300), "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := qt.New(t)
			b := packBody(tc.text, tc.html, tc.raw)
			text, html, raw, err := unpackBody(b, true)
			c.Assert(err, qt.IsNil)
			c.Assert(text, qt.Equals, tc.text)
			c.Assert(html, qt.Equals, tc.html)
			c.Assert(string(raw), qt.Equals, string(tc.raw))
			text, _, raw, err = unpackBody(b, false)
			c.Assert(err, qt.IsNil)
			c.Assert(text, qt.Equals, tc.text)
			if tc.name == "large raw" {
				c.Assert(raw, qt.IsNil) // its own frame, not inflated for the text
			}
		})
	}
	_, _, _, err := unpackBody([]byte{9, 1, 2}, true)
	qt.Assert(t, err, qt.IsNotNil)
}

// A database written before bodies were packed (schema version 5) keeps every message's
// text, HTML and raw bytes through the migration, and its threads list as before.
func TestMigrationPacksExistingBodies(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := sql.Open(driverName, "file:"+path+"?_foreign_keys=on")
	c.Assert(err, qt.IsNil)
	for _, name := range []string{"0001_init.sql", "0002_search.sql", "0003_smtp.sql", "0004_triage.sql", "0005_quarantine.sql"} {
		body, err := migrations.ReadFile("migrations/" + name)
		c.Assert(err, qt.IsNil)
		_, err = old.Exec(string(body))
		c.Assert(err, qt.IsNil, qt.Commentf("%s", name))
	}
	raw := "Subject: Hello\r\nMessage-ID: <a@b>\r\n\r\nFirst line\r\n"
	for _, q := range []string{
		"PRAGMA user_version = 5",
		"INSERT INTO accounts(id, plan, created_at) VALUES ('acct', 'exempt', 0)",
		"INSERT INTO inboxes(id, uuid, account_id, address, delivery_status, setup_available, created_at) VALUES (1, 'u1', 'acct', 'a@inboxd.test', 'ready', 1, 0)",
		"INSERT INTO threads(id, uuid, inbox_id, last_ts, last_message, message_count) VALUES (1, 't1', 1, 1000, 1, 1)",
		`INSERT INTO messages(id, uuid, inbox_id, thread_id, message_id, direction, ts, from_addr, to_addrs, cc_addrs, bcc_addrs, reply_to,
			subject, preview, body_text, body_html, in_reply_to, refs, attachment_count, quarantined, raw, triage, protection)
			VALUES (1, 'm1', 1, 1, '<a@b>', 'received', 1000, 'x@example.org', '["a@inboxd.test"]', '["cc@example.org"]', '[]', '[]',
			'Hello', 'First line', 'First line', '<p>First line</p>', '', '[]', 0, 0, CAST(? AS BLOB),
			'{"status":"pending"}', '{"status":"clean","scannedAt":"2026-01-01T00:00:00.000Z","authentication":{"spf":"pass","dkim":"none","dmarc":"none","signingDomains":[]},"spam":{"score":0.5,"threshold":6},"antivirus":{"status":"clean","signatures":[]},"reasons":[]}')`,
		`INSERT INTO protection_details(message_id, detail) VALUES (1, '{"spf":{"result":"pass","domain":"example.org"},"spamEngine":"builtin"}')`,
		"INSERT INTO message_labels(message_id, label) VALUES (1, 'received'), (1, 'unread')",
	} {
		var args []any
		if strings.Contains(q, "?") {
			args = append(args, raw)
		}
		_, err := old.Exec(q, args...)
		c.Assert(err, qt.IsNil, qt.Commentf("%s", q))
	}
	c.Assert(old.Close(), qt.IsNil)

	s, err := Open(ctx, path, Options{})
	c.Assert(err, qt.IsNil)
	defer s.Close()
	m, err := s.GetMessage(ctx, 1, "<a@b>")
	c.Assert(err, qt.IsNil)
	c.Assert(m.BodyText, qt.Equals, "First line")
	c.Assert(m.BodyHTML, qt.Equals, "<p>First line</p>")
	c.Assert(m.Labels, qt.DeepEquals, []string{"received", "unread"})
	c.Assert(m.Triage, qt.DeepEquals, &db.Triage{Status: db.TriagePending})
	c.Assert(m.Protection.Spam.Score, qt.Equals, 0.5)
	rm, err := s.ReviewMessage(ctx, "m1")
	c.Assert(err, qt.IsNil)
	c.Assert(rm.Detail.SPF.Domain, qt.Equals, "example.org")
	c.Assert(rm.Header, qt.Equals, "Subject: Hello\nMessage-ID: <a@b>")
	var body []byte
	c.Assert(s.r.QueryRow("SELECT body FROM messages WHERE id = 1").Scan(&body), qt.IsNil)
	_, _, gotRaw, err := unpackBody(body, true)
	c.Assert(err, qt.IsNil)
	c.Assert(string(gotRaw), qt.Equals, raw)
	// Version 8 dropped the generated text column (readers unpack body themselves).
	var columns int
	c.Assert(s.r.QueryRow("SELECT COUNT(*) FROM pragma_table_xinfo('messages') WHERE name = 'body_text'").Scan(&columns), qt.IsNil)
	c.Assert(columns, qt.Equals, 0)

	threads, _, err := s.ListThreads(ctx, 1, db.MessageFilter{}, 20, "")
	c.Assert(err, qt.IsNil)
	c.Assert(threads, qt.HasLen, 1)
	c.Assert(threads[0].Senders, qt.DeepEquals, []string{"x@example.org"})
	c.Assert(threads[0].Recipients, qt.DeepEquals, []string{"a@inboxd.test", "cc@example.org"})
	c.Assert(threads[0].Labels, qt.DeepEquals, []string{"received", "unread"})
}

func TestBodyTextPrefixCountsCharacters(t *testing.T) {
	c := qt.New(t)
	b := packBody("héllo wörld", "", nil)
	for n, want := range map[int]string{0: "", 2: "hé", 5: "héllo", 11: "héllo wörld", 50: "héllo wörld"} {
		got, err := bodyTextPrefix(b, n)
		c.Assert(err, qt.IsNil)
		c.Check(got, qt.Equals, want, qt.Commentf("n=%d", n))
	}
}

// A text that is the raw body with LF line ends is not stored but derived (layout 3); any
// other text is stored. Either way the three parts come back as they went in.
func TestTextDerivedFromRaw(t *testing.T) {
	c := qt.New(t)
	head := "Received: from mx\r\n\tby inboxd\r\nSubject: x\r\n\r\n"
	html := "<p>" + strings.Repeat("x", 80) + "</p>" // every case large enough to compress
	for _, tc := range []struct {
		name, text, body string
		derived          bool
	}{
		{"crlf", "one\ntwo\n\nthree\n", "one\r\ntwo\r\n\r\nthree\r\n", true},
		{"lone cr", "a\nb\nc", "a\rb\r\nc", true},
		{"lf", "a\nb\n", "a\nb\n", true},
		{"empty", "", "", true},
		{"decoded differs", "caf\u00e9\n", "caf=C3=A9\r\n", false},
		{"text shorter", "one\n", "one\r\ntwo\r\n", false},
		{"text longer", "one\ntwo\n", "one\r\n", false},
		{"crlf kept in text", "a\r\nb", "a\r\nb", false},
	} {
		raw := []byte(head + tc.body)
		b := packBody(tc.text, html, raw)
		c.Check(b[0] == bodyInRaw, qt.Equals, tc.derived, qt.Commentf("%s", tc.name))
		for _, wantRaw := range []bool{true, false} {
			text, gotHTML, got, err := unpackBody(b, wantRaw)
			c.Assert(err, qt.IsNil)
			c.Check(text, qt.Equals, tc.text, qt.Commentf("%s", tc.name))
			c.Check(gotHTML, qt.Equals, html)
			if wantRaw {
				c.Check(string(got), qt.Equals, string(raw))
			}
		}
	}
	// A layout 3 body whose offset points past its raw bytes is malformed, not a panic.
	enc, _ := codec()
	bad := enc.EncodeAll(append(appendString([]byte{200, 1}, ""), "Subject: x\r\n\r\n"...), []byte{bodyInRaw})
	_, _, _, err := unpackBody(bad, false)
	c.Assert(err, qt.ErrorIs, errBody)
}

// JSON columns round-trip through packJSON, short ones stored as they are.
func TestPackedJSONRoundTrip(t *testing.T) {
	for _, j := range []string{
		`{"status":"pending"}`,
		`{"status":"clean","scannedAt":"2026-11-22T02:13:44.120Z","authentication":{"spf":"pass","dkim":"pass","dmarc":"pass","signingDomains":["example.org"]},"spam":{"score":1.5,"threshold":6},"antivirus":{"status":"clean","signatures":[]},"reasons":[]}`,
		`{"spf":{"result":"pass","domain":"bücher.example"},"note":"` + strings.Repeat("ünïcödé ", 500) + `"}`,
	} {
		b := packJSON(sql.NullString{String: j, Valid: true}).([]byte)
		want := byte(jsonS2)
		if len(j) < minCompress {
			want = bodyPlain
		}
		qt.Assert(t, b[0], qt.Equals, want)
		if want == jsonS2 {
			qt.Assert(t, len(b) < len(j), qt.IsTrue, qt.Commentf("%d bytes for %d", len(b), len(j)))
		}
		got, err := unpackJSON(b)
		qt.Assert(t, err, qt.IsNil)
		qt.Assert(t, got, qt.Equals, j)
	}
	qt.Assert(t, packJSON(sql.NullString{}), qt.IsNil)
	_, err := unpackJSON([]byte{jsonS2, 0xff, 0xff})
	qt.Assert(t, errors.Is(err, errBody), qt.IsTrue)
}

// Rows written before JSON was packed with S2 hold zstd frames made with the same
// dictionary; they still read.
func TestZstdJSONStillReads(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderDictRaw(jsonDictID, jsonDict))
	qt.Assert(t, err, qt.IsNil)
	j := `{"status":"complete","version":1,"model":"inboxd-lr-1","category":{"value":"billing","confidence":0.8123}}`
	got, err := unpackJSON(enc.EncodeAll([]byte(j), []byte{bodyZstd}))
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, got, qt.Equals, j)
}
