package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/smtp"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// With --protection off nothing is scanned, as on the hosted service: spam arrives like
// any mail, without a protection field, never quarantined (extensions section 7).
func TestProtectionOffStoresMailUnscanned(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	var out bytes.Buffer
	m := &Main{DBPath: filepath.Join(t.TempDir(), "inboxd.db"), HTTPAddr: "127.0.0.1:0", SMTPAddr: "127.0.0.1:0",
		Domain: "inboxd.test", DNS: "off", Protection: "off", Stdout: &out}
	c.Assert(m.Run(context.Background()), qt.IsNil)
	defer m.Close()
	key := keyPattern.FindString(out.String())
	api := "http://" + m.Addr()
	req, err := http.NewRequest("POST", api+"/v1/inboxes", strings.NewReader(`{"username":"desk"}`))
	c.Assert(err, qt.IsNil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	c.Assert(err, qt.IsNil)
	res.Body.Close()
	c.Assert(res.StatusCode, qt.Equals, 200)
	gtube := "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X"
	msg := "From: eve@spam.example\r\nTo: desk@inboxd.test\r\nSubject: win\r\nMessage-ID: <spam-1@spam.example>\r\n\r\n" + gtube + "\r\n"
	c.Assert(smtp.SendMail(m.SMTPAddrListening(), nil, "eve@spam.example", []string{"desk@inboxd.test"}, []byte(msg)), qt.IsNil)
	status, body := get(t, api+"/v1/inboxes/desk%40inboxd.test/messages/"+url.PathEscape("<spam-1@spam.example>"), key)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	var got map[string]any
	c.Assert(json.Unmarshal(body, &got), qt.IsNil)
	_, scanned := got["protection"]
	c.Assert(scanned, qt.IsFalse)
	c.Assert(got["labels"], qt.DeepEquals, []any{"received", "unread"})
	c.Assert(got["senderAuthentication"], qt.Equals, "unchecked")

	bad := &Main{DBPath: filepath.Join(t.TempDir(), "x.db"), HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", Protection: "maybe"}
	c.Assert(bad.Run(context.Background()), qt.ErrorMatches, `--protection "maybe": use on or off`)
}

// The scan reads the server's clock, which the test controls move: a verdict given after
// the clock moved is dated as the message it belongs to.
func TestScanTimesFollowTheClock(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	s := startTriageServer(c, &Main{Triage: "off", TestControls: true})
	s.call("POST", "/_inboxd/clock", map[string]any{"advanceSeconds": 10 * 86400})
	id := s.call("POST", "/_inboxd/inboxes/desk%40inboxd.test/messages", map[string]any{"from": "ann@example.com", "text": "hi"})["messageId"].(string)
	m := s.message(id)
	scanned := m["protection"].(map[string]any)["scannedAt"].(string)
	c.Assert(scanned[:10], qt.Equals, m["timestamp"].(string)[:10], qt.Commentf("scannedAt %s, timestamp %s", scanned, m["timestamp"]))
}
