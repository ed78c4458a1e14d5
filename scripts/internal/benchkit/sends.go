package benchkit

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"time"
)

// SendResult is one measurement of API sends to a local inbox.
type SendResult struct {
	N, Conc   int
	Accepted  time.Duration // all requests answered
	Delivered time.Duration // all messages listed in the target inbox
	P50, P99  time.Duration // per request
}

// Sends posts n API sends of text (conc at a time) from the sender inboxes in turn to the
// local inbox target, then polls target until it lists every one. The sends come from
// several inboxes because an inbox may send only 250 messages a day. Every send has its
// own idempotency key, so none is taken for a retry of another; the keys of each call are
// new, so a database that kept an earlier run's sends (smtpbench -from) refuses none.
func (a *API) Sends(ctx context.Context, senders []string, target, text string, n, conc int) (SendResult, error) {
	res := SendResult{N: n, Conc: conc}
	run := rand.Text()
	var (
		mu   sync.Mutex
		lats []time.Duration
		next int
		fail error
	)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				body := map[string]any{"to": []string{target}, "subject": fmt.Sprintf("Bench %d", i),
					"text": text, "idempotencyKey": fmt.Sprintf("bench-%s-%d", run, i)}
				t := time.Now()
				err := a.Do(ctx, "POST", InboxPath(senders[i%len(senders)])+"/messages/send", body, nil)
				mu.Lock()
				if err != nil && fail == nil {
					fail = err
				}
				lats = append(lats, time.Since(t))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Accepted = time.Since(start)
	if fail != nil {
		return res, fail
	}
	slices.Sort(lats)
	res.P50, res.P99 = Pct(lats, 50), Pct(lats, 99)
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := a.Count(ctx, target)
		if err != nil {
			return res, err
		}
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("only %d of %d sends delivered after 60 s", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.Delivered = time.Since(start)
	return res, nil
}
