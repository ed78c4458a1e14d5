package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

// rig is a fresh server with its recipient inboxes and a fake DNS.
type rig struct {
	srv   *benchkit.Server
	dir   string
	rcpts []string
	stop  func()
}

func newRig(ctx context.Context, o options, extra ...string) (*rig, error) {
	dir, err := os.MkdirTemp("", "eventbench-")
	if err != nil {
		return nil, err
	}
	dns, stopDNS, err := benchkit.FakeDNS()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--smtp-max-per-ip", strconv.Itoa(o.conns)}, extra...)
	srv, err := benchkit.StartServer(o.bin, dir, dns, "", append(args, o.extra...))
	if err != nil {
		stopDNS()
		return nil, err
	}
	r := &rig{srv: srv, dir: dir, stop: func() { srv.Stop(); stopDNS(); os.RemoveAll(dir) }}
	for i := range o.inboxes {
		if err := srv.API.Do(ctx, "POST", "/v1/inboxes", map[string]any{"username": fmt.Sprintf("in%d", i)}, nil); err != nil {
			r.stop()
			return nil, err
		}
		r.rcpts = append(r.rcpts, fmt.Sprintf("in%d@inboxd.test", i))
	}
	return r, nil
}

// mail is n messages of about size bytes to the rig's inboxes, and the Message-ID of each.
func (r *rig) mail(n, size int, seed uint64) (msgs [][]byte, to, ids []string) {
	corpus := benchkit.CompanyMail(seed)
	for i := range n {
		rcpt := r.rcpts[i%len(r.rcpts)]
		id := fmt.Sprintf("ev-%d-%d", i, corpus.Rng.Int64())
		var b bytes.Buffer
		benchkit.WriteIngestHeader(&b, i, rcpt, corpus.Subject(), time.Now(), id, func(j int) string { return "none" })
		benchkit.WriteWrapped(&b, size, corpus.Word)
		b.WriteString("\r\n")
		msgs, to, ids = append(msgs, b.Bytes()), append(to, rcpt), append(ids, "<"+id+"@"+benchkit.SenderDomain+">")
	}
	return msgs, to, ids
}

// arrivals records when each message's email.received reached a listener.
type arrivals struct {
	mu sync.Mutex
	at map[string][]time.Time // by Message-ID
}

func newArrivals() *arrivals { return &arrivals{at: map[string][]time.Time{}} }

// note records one payload that arrived at t; a nil a records nothing.
func (a *arrivals) note(payload []byte, t time.Time) {
	if a == nil {
		return
	}
	var ev struct {
		Type    string `json:"type"`
		Message struct {
			MessageID string `json:"messageId"`
		} `json:"message"`
	}
	if json.Unmarshal(payload, &ev) != nil || ev.Type != "email.received" {
		return
	}
	a.mu.Lock()
	a.at[ev.Message.MessageID] = append(a.at[ev.Message.MessageID], t)
	a.mu.Unlock()
}

// receiver is a webhook endpoint on 127.0.0.1 that answers 204 and records arrivals.
func receiver(a *arrivals) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if a == nil {
			io.Copy(io.Discard, req.Body)
		} else {
			var b bytes.Buffer
			b.ReadFrom(req.Body)
			a.note(b.Bytes(), time.Now())
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go hs.Serve(ln)
	return "http://" + ln.Addr().String() + "/hook", func() { hs.Close() }, nil
}

// webhook registers url for every event of every inbox.
func (r *rig) webhook(ctx context.Context, url string) error {
	return r.srv.API.Do(ctx, "POST", "/v1/webhooks", map[string]any{"url": url}, nil)
}

// stream opens GET /v1/events and records its arrivals in a (nil: reads and drops them) until ctx ends. It returns once
// the stream answered 200.
func (r *rig) stream(ctx context.Context, a *arrivals) error {
	req, err := http.NewRequestWithContext(ctx, "GET", r.srv.API.Base+"/v1/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.srv.API.Key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	if res.StatusCode != 200 {
		res.Body.Close()
		return fmt.Errorf("GET /v1/events: %s", res.Status)
	}
	go func() {
		defer res.Body.Close()
		if a == nil { // read and drop: nothing is recorded
			io.Copy(io.Discard, res.Body)
			return
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && a != nil {
				a.note([]byte(data), time.Now())
			}
		}
	}()
	return nil
}
