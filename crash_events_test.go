package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// The events side of the crash loops (extensions sections 1 and 3): every acknowledged
// message has exactly its events in the log, however the kills fell, and a webhook
// receives each of them at least once, always under the same webhook-id.

// hookSink is a webhook receiver that records what it gets.
type hookSink struct {
	srv *httptest.Server
	mu  sync.Mutex
	ids map[[2]string]map[string]bool // (inbox, Message-ID) -> webhook-ids of email.received
}

func newHookSink(t *testing.T) *hookSink { return newGatedHookSink(t, nil) }

// newGatedHookSink is a hookSink that, when gate is not nil, asks it about each attempt
// once the attempt's body has arrived whole: an attempt gate refuses is answered nothing
// and not recorded (gate may hold it, to have a process killed in the middle of it).
func newGatedHookSink(t *testing.T, gate func(r *http.Request) bool) *hookSink {
	t.Helper()
	h := &hookSink{ids: map[[2]string]map[string]bool{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev receivedEvent
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(body, &ev)
		}
		if err != nil {
			// A kill cut the attempt short: the delivery is made again after the restart.
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if gate != nil && !gate(r) {
			return
		}
		if ev.Type == "email.received" {
			h.mu.Lock()
			k := [2]string{ev.InboxID, ev.Message.MessageID}
			if h.ids[k] == nil {
				h.ids[k] = map[string]bool{}
			}
			h.ids[k][r.Header.Get("webhook-id")] = true
			h.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

type receivedEvent struct {
	Type    string `json:"type"`
	EventID string `json:"eventId"`
	InboxID string `json:"inboxId"`
	Message struct {
		MessageID string `json:"messageId"`
	} `json:"message"`
}

// register creates the webhook on a running server.
func (h *hookSink) register(r *rig, p *proc) {
	r.must(p, 200, "POST", "/v1/webhooks", map[string]any{"url": h.srv.URL + "/hook", "eventTypes": []string{"email.received"}}, nil)
}

// waitFor waits until every (inbox, Message-ID) of want reached the receiver, and checks
// that each came under one webhook-id, however often it came.
func (h *hookSink) waitFor(t *testing.T, want map[[2]string]bool) {
	deadline := time.Now().Add(2 * time.Minute) // first retries come after 5, 10, 20, 40 s
	for {
		h.mu.Lock()
		missing := 0
		for k := range want {
			if len(h.ids[k]) == 0 {
				missing++
			}
		}
		h.mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d acknowledged messages never reached the webhook", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, ids := range h.ids {
		if !want[k] {
			t.Errorf("the webhook got %v, which was never acknowledged", k)
		}
		if len(ids) != 1 {
			t.Errorf("%v reached the webhook under %d ids: %v", k, len(ids), ids)
		}
	}
}

// replayReceived reads the event stream from its start and returns how many
// email.received events each (inbox, Message-ID) has, once it has read want of them (or
// after a bound).
func (r *rig) replayReceived(p *proc, want int) map[[2]string]int {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", p.api+"/v1/events?types=email.received", nil)
	qt.Assert(r.t, err, qt.IsNil)
	req.Header.Set("Authorization", "Bearer "+crashKey)
	req.Header.Set("Last-Event-ID", "0")
	res, err := http.DefaultClient.Do(req)
	qt.Assert(r.t, err, qt.IsNil)
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		r.t.Fatalf("GET /v1/events: %d %s", res.StatusCode, b)
	}
	got, n := map[[2]string]int{}, 0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for n < want && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev receivedEvent
		qt.Assert(r.t, json.Unmarshal([]byte(data), &ev), qt.IsNil)
		got[[2]string{ev.InboxID, ev.Message.MessageID}]++
		n++
	}
	// A few more, had the log any it should not: a short read past the count.
	more := make(chan struct{})
	go func() {
		defer close(more)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev receivedEvent
				if json.Unmarshal([]byte(data), &ev) == nil {
					got[[2]string{ev.InboxID, ev.Message.MessageID}]++
				}
			}
		}
	}()
	time.Sleep(time.Second)
	cancel()
	<-more
	return got
}
