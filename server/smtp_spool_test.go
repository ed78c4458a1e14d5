package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/server"
)

// largeMessage is a message with file attached (base64), to the support inbox.
func largeMessage(id string, file []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: <ann@customer.example>\r\nTo: <support@inboxd.test>\r\nSubject: Large\r\nMessage-ID: <%s@customer.example>\r\n", id)
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nThe file.\r\n")
	b.WriteString("--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=f.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(file)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--b--\r\n")
	return b.Bytes()
}

func randomFile(c *qt.C, n int) []byte {
	b := make([]byte, n)
	_, err := rand.Read(b)
	c.Assert(err, qt.IsNil)
	return b
}

// sendMail sends msg to support@ and returns the SMTP error of the end of data (nil: 250).
func sendMail(c *qt.C, addr string, msg []byte) error {
	cl, err := smtp.Dial(addr)
	c.Assert(err, qt.IsNil)
	defer cl.Close()
	return cl.SendMail("ann@customer.example", []string{"support@inboxd.test"}, bytes.NewReader(msg))
}

func replyOf(c *qt.C, err error) *smtp.SMTPError {
	var se *smtp.SMTPError
	c.Assert(errors.As(err, &se), qt.IsTrue, qt.Commentf("%v", err))
	return se
}

// TestSMTPLargeMessageStoredIntact receives a message far larger than what is kept in
// memory while it arrives: its attachment comes out byte for byte (also a range of it),
// and nothing is left in the spool directory.
func TestSMTPLargeMessageStoredIntact(t *testing.T) {
	c := qt.New(t)
	spool := t.TempDir()
	e := newSMTPEnv(t, server.SMTPConfig{SpoolDir: spool})
	file := randomFile(c, 3<<20)
	c.Assert(sendMail(c, e.addr, largeMessage("large-1", file)), qt.IsNil)

	msgs := e.messages("support@inboxd.test")
	c.Assert(msgs, qt.HasLen, 1)
	c.Assert(msgs[0].Attachments, qt.HasLen, 1)
	c.Check(msgs[0].Attachments[0].Size, qt.Equals, int64(len(file)))
	in := e.inbox("support@inboxd.test")
	_, body, err := e.store.OpenAttachment(context.Background(), in.UUID, msgs[0].UUID, msgs[0].Attachments[0].AttachmentID)
	c.Assert(err, qt.IsNil)
	got, err := io.ReadAll(body)
	c.Assert(err, qt.IsNil)
	c.Check(bytes.Equal(got, file), qt.IsTrue)
	// A range that crosses chunks, as a resumed download asks for.
	_, err = body.Seek(1<<20-10, io.SeekStart)
	c.Assert(err, qt.IsNil)
	part := make([]byte, 300<<10)
	_, err = io.ReadFull(body, part)
	c.Assert(err, qt.IsNil)
	c.Check(bytes.Equal(part, file[1<<20-10:1<<20-10+len(part)]), qt.IsTrue)

	left, err := os.ReadDir(spool)
	c.Assert(err, qt.IsNil)
	c.Check(left, qt.HasLen, 0)
}

// TestSMTPBudgetSpentAnswers451 tells a sender of a large message to come back later
// while the memory budget stays spent, and takes small mail meanwhile.
func TestSMTPBudgetSpentAnswers451(t *testing.T) {
	c := qt.New(t)
	budget := server.NewBudget(1 << 20)
	e := newSMTPEnv(t, server.SMTPConfig{Budget: budget, BudgetWait: 200 * time.Millisecond})
	release, err := budget.Acquire(context.Background(), 1<<20, time.Second) // a large message in progress
	c.Assert(err, qt.IsNil)

	large := largeMessage("large-2", randomFile(c, 200<<10))
	se := replyOf(c, sendMail(c, e.addr, large))
	c.Check(se.Code, qt.Equals, 451)
	c.Check(se.EnhancedCode, qt.Equals, smtp.EnhancedCode{4, 3, 1})
	c.Check(se.Message, qt.Equals, "Too much mail in progress; try again later")
	c.Assert(sendMail(c, e.addr, testMessage("small-2", "support@inboxd.test", "Small")), qt.IsNil)
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, 1)

	release()
	c.Assert(sendMail(c, e.addr, large), qt.IsNil) // the sender's retry
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, 2)
}

// TestSMTPSpoolFailureAnswers451 answers 451 4.3.1 when a large message cannot be held on
// disk (a full disk, a spool directory that cannot be made), and takes small mail still.
func TestSMTPSpoolFailureAnswers451(t *testing.T) {
	c := qt.New(t)
	notDir := filepath.Join(t.TempDir(), "file")
	c.Assert(os.WriteFile(notDir, nil, 0o600), qt.IsNil)
	e := newSMTPEnv(t, server.SMTPConfig{SpoolDir: notDir})

	se := replyOf(c, sendMail(c, e.addr, largeMessage("large-3", randomFile(c, 100<<10))))
	c.Check(se.Code, qt.Equals, 451)
	c.Check(se.EnhancedCode, qt.Equals, smtp.EnhancedCode{4, 3, 1})
	c.Check(se.Message, qt.Equals, "Insufficient system storage; try again later")
	c.Assert(sendMail(c, e.addr, testMessage("small-3", "support@inboxd.test", "Small")), qt.IsNil)
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, 1)
}
