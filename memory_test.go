package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	qt "github.com/frankban/quicktest"
)

// TestLargeMailKeepsMemoryBounded sends many large messages at once, as senders on the
// internet may: the server's resident memory grows by a bounded amount, not by the sum of
// the messages, and every message it answered 250 is stored intact. (The full-size case,
// sixty 24 MiB messages, is scripts/bigmail.sh's, in BENCHMARKS.md.)
func TestLargeMailKeepsMemoryBounded(t *testing.T) {
	t.Parallel()
	const (
		senders = 24
		size    = 4 << 20
	)
	r := newRig(t, crashFixture(`{"address": "big@{domain}"}`), "--mail-budget", "8MiB", "--smtp-max-per-ip", strconv.Itoa(senders))
	p := r.start()
	defer r.stop(p)
	pid := p.cmd.Process.Pid
	before := residentKB(t, pid, "VmRSS")

	type sent struct {
		id    string
		file  []byte
		reply int
	}
	msgs := make([]sent, senders)
	var wg sync.WaitGroup
	for i := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &msgs[i]
			m.id = fmt.Sprintf("<large-%d@sender.example>", i)
			m.file = make([]byte, size*3/4-4096)
			rand.NewChaCha8([32]byte{byte(i)}).Read(m.file)
			m.reply = sendLarge(t, p.smtp, m.id, m.file)
		}()
	}
	wg.Wait()
	grown := residentKB(t, pid, "VmHWM") - before
	t.Logf("resident memory grew by %d MB for %d messages of %d MB", grown>>10, senders, size>>20)

	for _, m := range msgs {
		qt.Assert(t, m.reply, qt.Equals, 250, qt.Commentf("message %s", m.id))
		var msg struct {
			Attachments []struct {
				ID   string `json:"attachmentId"`
				Size int    `json:"size"`
			} `json:"attachments"`
		}
		r.must(p, 200, "GET", messageURL("big@inboxd.test", m.id), nil, &msg)
		qt.Assert(t, msg.Attachments, qt.HasLen, 1)
		qt.Assert(t, msg.Attachments[0].Size, qt.Equals, len(m.file))
		var link struct {
			URL string `json:"downloadUrl"`
		}
		r.must(p, 200, "GET", messageURL("big@inboxd.test", m.id)+"/attachments/"+msg.Attachments[0].ID, nil, &link)
		res, err := http.Get(link.URL)
		qt.Assert(t, err, qt.IsNil)
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		qt.Assert(t, err, qt.IsNil)
		qt.Assert(t, sha256.Sum256(got) == sha256.Sum256(m.file), qt.IsTrue, qt.Commentf("attachment of %s changed", m.id))
	}
	// All at once in memory, the messages would cost several times their 96 MB (before the
	// budget, 24 of them grew the server by over 250 MB); with an 8 MiB budget two are
	// processed at a time, and what grows is mostly the garbage the collector lets pile
	// up under its soft limit (112 MiB, docs/operations.md "Install on a server").
	qt.Assert(t, grown < 150<<10, qt.IsTrue, qt.Commentf("resident memory grew by %d MB", grown>>10))
}

// sendLarge sends a message with file attached over SMTP and returns the reply code to
// the end of its data.
func sendLarge(t *testing.T, addr, id string, file []byte) int {
	c, err := smtpDial(addr)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer c.Close()
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: <sender@sender.example>\r\nTo: <big@inboxd.test>\r\nSubject: large\r\nMessage-ID: %s\r\n", id)
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nAttached.\r\n")
	b.WriteString("--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=f.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(file)
	for len(enc) > 0 {
		n := min(len(enc), 76)
		b.WriteString(enc[:n] + "\r\n")
		enc = enc[n:]
	}
	b.WriteString("--b--\r\n")
	if err := c.Mail("sender@sender.example", nil); err != nil {
		t.Error(err)
		return 0
	}
	if err := c.Rcpt("big@inboxd.test", nil); err != nil {
		t.Error(err)
		return 0
	}
	w, err := c.Data()
	if err != nil {
		t.Error(err)
		return 0
	}
	w.Write(b.Bytes())
	if err := w.Close(); err != nil {
		return smtpCode(err)
	}
	return 250
}

// residentKB reads a memory figure of a process (VmRSS, VmHWM) in KiB.
func residentKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	qt.Assert(t, err, qt.IsNil)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			qt.Assert(t, err, qt.IsNil)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
