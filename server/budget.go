package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// DefaultBudget is the default size of a Budget: about what two 24 MiB messages cost in
// memory while they are parsed, scanned and stored, which keeps a server receiving sixty
// of them at once under 300 MB resident (BENCHMARKS.md, "Large mail").
const DefaultBudget = 48 << 20

// budgetFree is the size under which work takes nothing from a Budget: a message or
// request body that small costs little, and how many are processed at once is bounded by
// the connection limits already. Most mail and every ordinary API request is that small,
// so they never wait behind a large message.
const budgetFree = 64 << 10

// Budget bounds the bytes of mail and request bodies being processed at once, the SMTP
// listener's and the HTTP API's together: the memory a large message costs while it is
// parsed and stored is a few times its size, and without a bound sixty senders of 24 MiB
// messages took a server to 4.9 GB. Work waits for its share in arrival order, so a
// large message is not starved by small ones.
type Budget struct {
	size int64
	sem  *semaphore.Weighted

	inUse   atomic.Int64
	waited  atomic.Uint64 // acquisitions that had to wait, and got their share
	refused atomic.Uint64 // acquisitions that waited their longest and gave up
}

// NewBudget returns a budget of size bytes (DefaultBudget when size <= 0).
func NewBudget(size int64) *Budget {
	if size <= 0 {
		size = DefaultBudget
	}
	return &Budget{size: size, sem: semaphore.NewWeighted(size)}
}

// errBudgetSpent is Acquire's error when the budget stayed spent for as long as the
// caller would wait.
var errBudgetSpent = errors.New("server: the memory budget for mail is spent")

// Acquire takes n bytes of the budget (all of it when n is larger), waiting at most wait,
// and returns the function that gives them back. It fails with errBudgetSpent when the
// wait ran out, or with ctx's error. Work of under budgetFree bytes takes nothing.
func (b *Budget) Acquire(ctx context.Context, n int64, wait time.Duration) (func(), error) {
	if b == nil || n < budgetFree {
		return func() {}, nil
	}
	n = min(n, b.size)
	if !b.sem.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		err := b.sem.Acquire(wctx, n)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			b.refused.Add(1)
			return nil, errBudgetSpent
		}
		b.waited.Add(1)
	}
	b.inUse.Add(n)
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			b.inUse.Add(-n)
			b.sem.Release(n)
		}
	}, nil
}

// writeMetrics prints the budget's gauges and counters (GET /metrics).
func (b *Budget) writeMetrics(w *strings.Builder) {
	if b == nil {
		return
	}
	header(w, "inboxd_mail_budget_bytes", "gauge", "The memory budget of mail and request bodies being processed (--mail-budget): its size, and the bytes in use.")
	fmt.Fprintf(w, "inboxd_mail_budget_bytes{state=\"size\"} %d\ninboxd_mail_budget_bytes{state=\"in_use\"} %d\n", b.size, b.inUse.Load())
	header(w, "inboxd_mail_budget_waits_total", "counter", "Messages and request bodies that waited for the budget: acquired (after a wait), refused (SMTP 451 4.3.1, HTTP 503).")
	fmt.Fprintf(w, "inboxd_mail_budget_waits_total{result=\"acquired\"} %d\ninboxd_mail_budget_waits_total{result=\"refused\"} %d\n",
		b.waited.Load(), b.refused.Load())
}
