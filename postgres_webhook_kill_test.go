package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db/postgres/pgtest"
)

// attemptHolder holds each webhook attempt until released, counting those a kill cut.
type attemptHolder struct {
	release chan struct{}
	mu      sync.Mutex
	held    int // attempts that were held
	cut     int // held attempts whose sender died
}

// gate holds r until release, or until its sender is gone (then it refuses it).
func (h *attemptHolder) gate(r *http.Request) bool {
	select {
	case <-h.release:
		return true
	default:
	}
	h.mu.Lock()
	h.held++
	h.mu.Unlock()
	select {
	case <-h.release:
		return true
	case <-r.Context().Done():
		h.mu.Lock()
		h.cut++
		h.mu.Unlock()
		return false
	}
}

// waitHeld waits until the holder holds a request of p (a what), and a little longer, so
// that p has claimed what it can take at once.
func (h *attemptHolder) waitHeld(t *testing.T, p *proc, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for held, _ := h.counts(); held == 0; held, _ = h.counts() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 15 s:\n%s", what, p.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
}

func (h *attemptHolder) counts() (held, cut int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held, h.cut
}

// TestKillDuringWebhookDeliveryOnPostgres kills a process with SIGKILL while it holds
// webhook attempts in flight (the receiver holds them open, so the kill lands in the
// middle of them, not by chance as in the crash loops), and checks that the other process
// on the database takes its deliveries over once their leases end: every acknowledged
// message has exactly one email.received event, and each reaches the webhook at least once,
// always under the same webhook-id. The survivor's clock (a test control) is moved past
// the leases, which otherwise end a minute later.
func TestKillDuringWebhookDeliveryOnPostgres(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	bin := inboxdBinary(t)
	seed := filepath.Join(t.TempDir(), "fixture.json")
	qt.Assert(t, os.WriteFile(seed, []byte(crashFixture(`{"address": "sink@{domain}"}`)), 0o644), qt.IsNil)
	holder := &attemptHolder{release: make(chan struct{})}
	hook := newGatedHookSink(t, holder.gate)
	r := &rig{t: t, client: &http.Client{Timeout: 20 * time.Second}}

	victim := startInboxd(t, bin, "--db", dbURL, "--data-dir", t.TempDir(), "--seed", seed)
	hook.register(r, victim)
	acked := map[[2]string]bool{}
	deliver := func(p *proc, n int) {
		t.Helper()
		id := fmt.Sprintf("<hooked-%d@customer.example>", n)
		cl, err := smtpDial(p.smtp)
		qt.Assert(t, err, qt.IsNil)
		defer cl.Close()
		msg := "From: ann@customer.example\r\nTo: sink@inboxd.test\r\nSubject: hooked\r\nMessage-ID: " + id + "\r\n\r\nhi\r\n"
		qt.Assert(t, cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"}, strings.NewReader(msg)), qt.IsNil)
		acked[[2]string{"sink@inboxd.test", id}] = true
	}
	for n := range 6 {
		deliver(victim, n)
	}
	holder.waitHeld(t, victim, "webhook attempt")

	survivor := startInboxd(t, bin, "--db", dbURL, "--data-dir", t.TempDir(), "--test-controls")
	victim.kill(t)
	deadline := time.Now().Add(5 * time.Second)
	for _, cut := holder.counts(); cut == 0; _, cut = holder.counts() {
		if time.Now().After(deadline) {
			t.Fatalf("the kill cut no attempt in flight")
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(holder.release)
	r.must(survivor, 200, "POST", "/_inboxd/clock", map[string]any{"advanceSeconds": 300}, nil)
	deliver(survivor, 6) // mail goes on arriving, at the survivor
	hook.waitFor(t, acked)
	events := r.replayReceived(survivor, len(acked))
	for k := range acked {
		qt.Check(t, events[k], qt.Equals, 1, qt.Commentf("%v has %d email.received events", k, events[k]))
	}
	qt.Check(t, len(events), qt.Equals, len(acked), qt.Commentf("events of messages nobody sent"))
	held, cut := holder.counts()
	t.Logf("%d attempts held, %d cut by the kill", held, cut)
}
