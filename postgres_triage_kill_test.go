package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db/postgres/pgtest"
)

// heldLLM is an OpenAI-compatible endpoint whose answers wait at a gate (attemptHolder),
// counting the answers it gave for each message, by its subject.
type heldLLM struct {
	*httptest.Server
	mu       sync.Mutex
	answered map[string]int
}

func newHeldLLM(t *testing.T, h *attemptHolder) *heldLLM {
	l := &heldLLM{answered: map[string]int{}}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if !h.gate(r) {
			return
		}
		user := req.Messages[len(req.Messages)-1].Content
		subject := user[strings.Index(user, `"subject":"`)+len(`"subject":"`):]
		subject = subject[:strings.IndexByte(subject, '"')]
		l.mu.Lock()
		l.answered[subject]++
		l.mu.Unlock()
		b, _ := json.Marshal(map[string]any{"model": "held-llm", "choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "content": answers["billing-yes-high"]}}}})
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *heldLLM) answers() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.answered {
		out[k] = v
	}
	return out
}

// TestKillDuringLLMTriageOnPostgres kills a process with SIGKILL while its LLM endpoint
// holds every one of its triage requests (so the kill lands mid-analysis), and checks that
// the other process on the database leaves the messages alone while the dead one's leases
// last, then analyzes each of them, once, when they end: every message's triage ends
// complete, with exactly one answer of the survivor's endpoint for each. (Each process has
// an endpoint of its own, so that no answer to the dead one is counted.) The survivor's
// clock (a test control) is moved past the leases, which otherwise end five minutes later.
func TestKillDuringLLMTriageOnPostgres(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	bin := inboxdBinary(t)
	seed := filepath.Join(t.TempDir(), "fixture.json")
	qt.Assert(t, os.WriteFile(seed, []byte(crashFixture(`{"address": "sink@{domain}"}`)), 0o644), qt.IsNil)
	holder := &attemptHolder{release: make(chan struct{})} // never released: the victim gets no answer
	answering := &attemptHolder{release: make(chan struct{})}
	close(answering.release)
	victimLLM, survivorLLM := newHeldLLM(t, holder), newHeldLLM(t, answering)
	triage := func(l *heldLLM) []string {
		return []string{"--triage", "llm", "--triage-url", l.URL + "/v1", "--triage-model", "held", "--triage-key", "k"}
	}
	r := &rig{t: t, client: &http.Client{Timeout: 20 * time.Second}}

	victim := startInboxd(t, bin, append([]string{"--db", dbURL, "--data-dir", t.TempDir(), "--seed", seed}, triage(victimLLM)...)...)
	const n = 4 // the victim's analyzers: each message is claimed and held once all are held
	for i := range n {
		cl, err := smtpDial(victim.smtp)
		qt.Assert(t, err, qt.IsNil)
		msg := fmt.Sprintf("From: ann@customer.example\r\nTo: sink@inboxd.test\r\nSubject: triaged-%d\r\nMessage-ID: <triaged-%d@customer.example>\r\n\r\nhi\r\n", i, i)
		qt.Assert(t, cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"}, strings.NewReader(msg)), qt.IsNil)
		cl.Close()
	}
	deadline := time.Now().Add(15 * time.Second)
	for held, _ := holder.counts(); held < n; held, _ = holder.counts() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d triage requests held within 15 s:\n%s", held, n, victim.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}

	survivor := startInboxd(t, bin, append([]string{"--db", dbURL, "--data-dir", t.TempDir(), "--test-controls"}, triage(survivorLLM)...)...)
	victim.kill(t)
	status := func(i int) string {
		var m struct{ Triage struct{ Status string } }
		r.must(survivor, 200, "GET", "/v1/inboxes/sink%40inboxd.test/messages/"+url.PathEscape(fmt.Sprintf("<triaged-%d@customer.example>", i)), nil, &m)
		return m.Triage.Status
	}
	time.Sleep(time.Second) // several polls of the survivor's worker, within the leases
	qt.Assert(t, survivorLLM.answers(), qt.HasLen, 0, qt.Commentf("analyzed while the dead process's leases lasted"))
	for i := range n {
		qt.Assert(t, status(i), qt.Equals, "pending")
	}

	r.must(survivor, 200, "POST", "/_inboxd/clock", map[string]any{"advanceSeconds": 360}, nil)
	deadline = time.Now().Add(15 * time.Second)
	for i := range n {
		for status(i) == "pending" {
			if time.Now().After(deadline) {
				t.Fatalf("message %d still pending 15 s after the leases ended:\n%s", i, survivor.logText())
			}
			time.Sleep(20 * time.Millisecond)
		}
		qt.Check(t, status(i), qt.Equals, "complete")
	}
	got := survivorLLM.answers()
	for i := range n {
		qt.Check(t, got[fmt.Sprintf("triaged-%d", i)], qt.Equals, 1, qt.Commentf("answers for message %d", i))
	}
	_, cut := holder.counts()
	t.Logf("%d requests cut by the kill", cut)
}
