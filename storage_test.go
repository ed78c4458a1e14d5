package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
	"github.com/inboxd/inboxd/db/sqlite"
)

// A full disk or a read-only database is a condition the operator fixes, not a failure of
// the request: writes answer 503 unavailable with transient true (SMTP 451, so senders
// retry), reads go on, nothing half-written stays, and everything works again once the
// condition is gone. db.Store.SetFault imposes the conditions through SQLite itself
// (PRAGMA max_page_count capped at the current size, PRAGMA query_only), which needs no
// root and no special filesystem; TestRealFullDisk does it with a real full filesystem
// where the machine allows mounting one.

// faultServer is the whole program in process, with SMTP, driven over HTTP and SMTP.
type faultServer struct {
	t    *testing.T
	m    *Main
	base string
}

func startFaultServer(t *testing.T) *faultServer {
	dir := t.TempDir()
	m := &Main{DBPath: filepath.Join(dir, "inboxd.db"), HTTPAddr: "127.0.0.1:0", SMTPAddr: "127.0.0.1:0", Domain: "inboxd.test",
		DNS: "off", Seeds: []string{writeFixture(t, dir)}}
	qt.Assert(t, m.Run(context.Background()), qt.IsNil)
	t.Cleanup(func() { m.Close() })
	return &faultServer{t: t, m: m, base: "http://" + m.Addr()}
}

// do sends one API request with the crash key and returns the status and body.
func (s *faultServer) do(method, path string, body any) (int, []byte) {
	s.t.Helper()
	return call(s.t, s.base, crashKey, method, path, body)
}

// unavailable asserts the answer is 503 unavailable, transient.
func unavailable(t *testing.T, status int, body []byte) {
	t.Helper()
	qt.Assert(t, status, qt.Equals, 503, qt.Commentf("%s", body))
	var e struct {
		Error struct {
			Code      string `json:"code"`
			Transient bool   `json:"transient"`
		} `json:"error"`
	}
	qt.Assert(t, json.Unmarshal(body, &e), qt.IsNil)
	qt.Assert(t, e.Error.Code, qt.Equals, "unavailable")
	qt.Assert(t, e.Error.Transient, qt.IsTrue)
}

// noise is incompressible text: stored bodies are compressed, and a full disk must show.
func noise(n int) string {
	b := make([]byte, n*3/4)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func smtpMessage(id, subject, body string) string {
	var lines []string
	for len(body) > 76 {
		lines, body = append(lines, body[:76]), body[76:]
	}
	body = strings.Join(append(lines, body), "\r\n")
	return "From: ann@customer.example\r\nTo: sink@inboxd.test\r\nSubject: " + subject + "\r\nMessage-ID: <" + id +
		"@customer.example>\r\n\r\n" + body + "\r\n"
}

func TestStorageFaultsAreTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault sqlite.Fault
	}{{"disk full", sqlite.FaultFull}, {"read-only database", sqlite.FaultReadOnly}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startFaultServer(t)
			ctx := context.Background()
			send := func(key string) (int, []byte) {
				return s.do("POST", "/v1/inboxes/agent%40inboxd.test/messages/send", map[string]any{
					"to": []string{"sink@inboxd.test"}, "subject": "fault " + key, "text": "faulttoken " + noise(200<<10), "idempotencyKey": key})
			}
			status, body := send("before")
			qt.Assert(t, status, qt.Equals, 200, qt.Commentf("%s", body))
			var before struct{ MessageID, ThreadID string }
			qt.Assert(t, json.Unmarshal(body, &before), qt.IsNil)

			qt.Assert(t, s.m.store.(*sqlite.Store).SetFault(ctx, tc.fault), qt.IsNil)
			// A send, an inbox, a label change: every write is refused, as transient.
			status, body = send("during")
			unavailable(t, status, body)
			status, body = s.do("POST", "/v1/inboxes", map[string]any{"username": "fault-" + hex.EncodeToString([]byte(noise(8)))[:6]})
			if tc.fault == sqlite.FaultReadOnly || status != 200 { // a small row may still fit a full disk's last page
				unavailable(t, status, body)
			}
			status, body = s.do("PATCH", "/v1/inboxes/agent%40inboxd.test/threads/"+before.ThreadID+"/labels",
				map[string]any{"addLabels": []string{"faulty-" + hex.EncodeToString([]byte(noise(40)))[:50]}})
			if tc.fault == sqlite.FaultReadOnly || status != 200 {
				unavailable(t, status, body)
			}
			// Mail over SMTP is refused with 451: the sender keeps it and retries.
			cl, err := smtpDial(s.m.SMTPAddrListening())
			qt.Assert(t, err, qt.IsNil)
			err = cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"},
				strings.NewReader(smtpMessage("fault-1", "over smtp", "faulttoken "+noise(200<<10))))
			qt.Assert(t, smtpCode(err), qt.Equals, 451, qt.Commentf("%v", err))
			cl.Close()
			// Reads go on.
			status, body = s.do("GET", "/v1/inboxes/agent%40inboxd.test/messages", nil)
			qt.Assert(t, status, qt.Equals, 200, qt.Commentf("%s", body))
			status, _ = s.do("GET", "/v1/inboxes/agent%40inboxd.test/messages/"+pathEscape(before.MessageID), nil)
			qt.Assert(t, status, qt.Equals, 200)

			// Space returns: the same requests succeed, once.
			qt.Assert(t, s.m.store.(*sqlite.Store).SetFault(ctx, sqlite.NoFault), qt.IsNil)
			status, body = send("during")
			qt.Assert(t, status, qt.Equals, 200, qt.Commentf("%s", body))
			var during struct {
				MessageID    string
				Deduplicated bool
			}
			qt.Assert(t, json.Unmarshal(body, &during), qt.IsNil)
			qt.Assert(t, during.Deduplicated, qt.IsFalse) // the refused attempt left nothing behind
			cl, err = smtpDial(s.m.SMTPAddrListening())
			qt.Assert(t, err, qt.IsNil)
			qt.Assert(t, cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"},
				strings.NewReader(smtpMessage("fault-1", "over smtp", "faulttoken "+noise(1000)))), qt.IsNil)
			cl.Close()
			// The workers carried on: the send is delivered into sink, and search finds
			// all three messages there.
			deadline := time.Now().Add(10 * time.Second)
			for {
				status, body = s.do("GET", "/v1/inboxes/sink%40inboxd.test/messages/search?query=faulttoken", nil)
				qt.Assert(t, status, qt.Equals, 200, qt.Commentf("%s", body))
				var res struct{ Messages []struct{ Subject string } }
				qt.Assert(t, json.Unmarshal(body, &res), qt.IsNil)
				if len(res.Messages) == 3 {
					break
				}
				qt.Assert(t, time.Now().Before(deadline), qt.IsTrue, qt.Commentf("search after recovery: %s", body))
				time.Sleep(20 * time.Millisecond)
			}
			v, err := s.m.store.(*sqlite.Store).IntegrityCheck(ctx)
			qt.Assert(t, err, qt.IsNil)
			qt.Assert(t, v, qt.Equals, "ok")
		})
	}
}

// TestRealFullDisk runs the real binary on a small tmpfs that fills up, then gets its space
// back: the same answers as with the simulated fault, and no crash. (A filesystem cannot
// be remounted read-only while the server holds files open for writing, so the read-only
// case is only simulated.) Mounting needs root (or CAP_SYS_ADMIN); elsewhere the test skips and
// TestStorageFaultsAreTransient covers the answers.
func TestRealFullDisk(t *testing.T) {
	t.Parallel()
	bin := crashBinary(t)
	dir := t.TempDir()
	mnt := mountTmpfs(t, dir, "3m")
	remount := func(opts string) {
		out, err := exec.Command("mount", "-o", "remount,"+opts, mnt).CombinedOutput()
		qt.Assert(t, err, qt.IsNil, qt.Commentf("%s", out))
	}
	r := &rig{t: t, bin: bin, dbPath: filepath.Join(mnt, "inboxd.db"), seed: writeFixture(t, dir), client: &http.Client{Timeout: 30 * time.Second}}
	p := r.start()
	send := func(key string, size int) (int, []byte) {
		b, _ := json.Marshal(map[string]any{"to": []string{"sink@inboxd.test"}, "subject": "full " + key,
			"text": "fulltoken " + noise(size), "idempotencyKey": key})
		req, _ := http.NewRequest("POST", p.api+"/v1/inboxes/agent%40inboxd.test/messages/send", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+crashKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := r.client.Do(req)
		qt.Assert(t, err, qt.IsNil, qt.Commentf("%s", p.log))
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, body
	}
	smtpSend := func(id string) error {
		cl, err := smtpDial(p.smtp)
		qt.Assert(t, err, qt.IsNil)
		defer cl.Close()
		// Twice the size of the sends that fill the disk: a failed transaction leaves its
		// WAL frames for the next one to reuse, so a message of their size might still fit.
		return cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"}, strings.NewReader(smtpMessage(id, "full "+id, "fulltoken "+noise(600<<10))))
	}
	// Fill the disk.
	sent, full := 0, ""
	for i := range 40 {
		key := fmt.Sprintf("fill-%d", i)
		status, body := send(key, 300<<10)
		if status == 200 {
			sent++
			continue
		}
		unavailable(t, status, body)
		full = key
		break
	}
	qt.Assert(t, full, qt.Not(qt.Equals), "", qt.Commentf("the 3 MiB disk never filled"))
	qt.Assert(t, smtpCode(smtpSend("full-1")), qt.Equals, 451)
	status, _ := r.call(p, "GET", "/v1/inboxes/agent%40inboxd.test/messages", nil, nil)
	qt.Assert(t, status, qt.Equals, 200)

	// Space returns: what was refused goes through, once, and is found.
	remount("size=64m")
	status, body := send(full, 300<<10)
	qt.Assert(t, status, qt.Equals, 200, qt.Commentf("%s\n%s", body, p.log))
	qt.Assert(t, smtpSend("full-1"), qt.IsNil)
	r.drain(p)
	found := r.search(p, "sink@inboxd.test", "fulltoken")
	qt.Assert(t, len(found), qt.Equals, sent+2, qt.Commentf("%v\n%s", found, p.log))
	r.checkIndex(p)
	r.stop(p)
	t.Logf("%d messages filled 3 MiB", sent)
}
