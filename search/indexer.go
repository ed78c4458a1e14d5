package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Change is one row of the store's index queue: a message to reindex (or drop, when the
// store no longer has it searchable), or, with Message 0, a deleted inbox to drop whole.
type Change struct {
	Seq, Message, Inbox, TS int64
}

// Source is what the indexer needs of the store. The store is the truth; the index is
// derived from it and can always be rebuilt.
type Source interface {
	// StoreID identifies the store; an index built from another store is rebuilt.
	StoreID(ctx context.Context) (string, error)
	// QueueBounds returns the newest sequence number ever queued and the oldest still queued
	// (last+1 when the queue is empty).
	QueueBounds(ctx context.Context) (last, first int64, err error)
	// LastSeq returns the newest sequence number ever queued.
	LastSeq(ctx context.Context) (int64, error)
	// InboxChanges returns up to limit changes after seq queued for one inbox, in order.
	InboxChanges(ctx context.Context, inbox, after int64, limit int) ([]Change, error)
	// Changes returns up to limit queued changes after seq, in order.
	Changes(ctx context.Context, after int64, limit int) ([]Change, error)
	// Docs returns the searchable messages among ids; a message left out is dropped.
	Docs(ctx context.Context, ids []int64) ([]Doc, error)
	// Scan returns up to limit searchable messages with a row id above after, by row id.
	Scan(ctx context.Context, after int64, limit int) ([]Doc, error)
	// Count returns the number of searchable messages.
	Count(ctx context.Context) (int64, error)
	// Trim records the cursor of reader (this index) in the store's change log: it has
	// every change up to seq on disk. The store keeps what any of its readers still needs
	// and drops the rest.
	Trim(ctx context.Context, reader string, through int64) error
}

// Options tunes an Indexer; zero values take the defaults.
type Options struct {
	// BatchSize is the most queue rows one batch applies (default 1000; fewer when their
	// documents hold more than docBudget of text). A batch's documents and segment build
	// are most of the live heap while mail arrives (~45 MB for 2,000 rows of 2 KB mail, on
	// top of ~25 at rest), so under the runtime's soft limit the batch sets how often the
	// collector runs: what that costs at each size is in runtime.go. Building and merging
	// segments took the same share of the ingest's CPU with 1,000 rows as with 2,000
	// (12.3% and 10.7%; BENCHMARKS.md, thirteenth session); earlier, with zapx's builder,
	// 1000 rows cost ~5% more CPU than 2000.
	BatchSize int
	// Poll is how often the queue is checked without a wake-up (default 1s). A search
	// matches what was committed to its inbox before it and is not indexed yet itself
	// (tail.go), so the interval only sets how much the indexer gathers into one segment:
	// bleve's cost per message falls with the batch (a segment's build and its later
	// merges); measured on SMTP ingest, 1 s instead of 200 ms took 14% less CPU.
	Poll time.Duration
	// Wait bounds how long CatchUp, and a search behind more pending changes than it
	// matches itself, wait for the index (default 500ms); after it the search answers
	// from what is indexed.
	Wait time.Duration
	// RetryMin and RetryMax bound the wait before another attempt when the index failed to
	// open, rebuild or apply a batch (defaults 1s and 60s; retry.go). The wait doubles
	// from RetryMin with each failure in a row, up to RetryMax. A lasting failure is a full
	// disk or a directory that cannot be written: each attempt at a rebuild rescans the
	// store and writes until the disk is full again, taking the space mail intake needs,
	// so it is made at most about once a minute, and the index heals within a minute of
	// the cause being removed.
	RetryMin, RetryMax time.Duration
	Log                *slog.Logger
}

// ErrNotReady means the index is being built, or cannot be updated and is retried
// (Degraded), and cannot answer yet.
var ErrNotReady = errors.New("search: the index is being rebuilt")

// Indexer keeps an Index in step with its Source and answers searches.
type Indexer struct {
	path string
	src  Source
	opt  Options
	log  *slog.Logger

	mu       sync.Mutex
	ix       *Index // nil while rebuilding
	store    string
	advanced chan struct{} // closed and replaced whenever applied moves

	applied   atomic.Int64 // last queue seq the index has (in memory)
	persisted atomic.Int64 // last queue seq the index has on disk
	reader    string       // this index's id in the store's change log (reader.go)
	trimmed   int64        // last seq trimmed from the queue (loop goroutine only)
	trimmedAt time.Time    // when the cursor was last recorded (loop goroutine only)
	seen      int64        // last seq a step has read (loop goroutine only)

	degraded atomic.Bool   // the last attempt to open, rebuild or update the index failed
	failures atomic.Uint64 // failed attempts since start
	outage   outage        // the failures in a row (loop goroutine only; retry.go)
	trimFail bool          // the last trim failed (loop goroutine only)

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// NewIndexer returns an indexer of the index directory path, fed from src.
func NewIndexer(path string, src Source, opt Options) *Indexer {
	if opt.BatchSize <= 0 {
		opt.BatchSize = 1000
	}
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if opt.Wait <= 0 {
		opt.Wait = 500 * time.Millisecond
	}
	if opt.RetryMax <= 0 {
		opt.RetryMax = time.Minute
	}
	if opt.RetryMin <= 0 {
		opt.RetryMin = min(time.Second, opt.RetryMax)
	}
	opt.RetryMax = max(opt.RetryMax, opt.RetryMin)
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	return &Indexer{path: path, src: src, opt: opt, log: opt.Log, advanced: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// Start opens the index and starts following the queue. An index that is missing,
// unreadable, of another version or store, or older than the store (it misses changes
// the queue no longer holds) is rebuilt in the background; searches answer ErrNotReady
// until it is done.
//
// An index that cannot be opened or checked (a full disk, a directory it may not write,
// the store unreadable for a moment) does not stop the server: mail intake does not need
// the index, which is derived data. Start returns, the index is Degraded, and it is
// tried again (retry.go) until it works. Start fails only when ctx ends, or when another
// process holds the index: that is a second server on the same database, a mistake to
// report at once rather than wait out.
func (x *Indexer) Start(ctx context.Context) error {
	rebuild, err := x.open(ctx)
	if err != nil && (ctx.Err() != nil || errors.Is(err, ErrInUse)) {
		return err
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	x.cancel, x.done = cancel, make(chan struct{})
	go x.loop(loopCtx, rebuild, err)
	return nil
}

// open opens the index and checks it against the store. When the index can serve, it
// is in use and open returns ""; otherwise it returns why the index must be rebuilt, or
// the error that kept it from telling.
func (x *Indexer) open(ctx context.Context) (string, error) {
	store, err := x.src.StoreID(ctx)
	if err != nil {
		return "", err
	}
	x.store = store
	if x.reader == "" {
		if x.reader, err = readerID(x.path); err != nil {
			return "", err
		}
	}
	ix, meta, err := Open(x.path)
	if errors.Is(err, ErrCorrupt) {
		if !x.retrying() { // a retry is logged by failed, at its bounded rate
			x.log.Warn("search index unreadable; rebuilding it", "path", x.path, "err", err)
		}
		if err := os.RemoveAll(x.path); err != nil {
			return "", err
		}
		ix, meta, err = Open(x.path)
	}
	if err != nil {
		return "", err
	}
	// The cursor is recorded before the check reads the log's bounds, so that no change
	// the index still needs is dropped after the check found it kept.
	err = x.src.Trim(ctx, x.reader, meta.Seq)
	if err != nil {
		ix.Close()
		return "", err
	}
	rebuild, first, err := x.check(ctx, &meta)
	if err != nil || rebuild != "" {
		ix.Close()
		return rebuild, err
	}
	x.trimmed = first - 1
	x.use(ix, meta.Seq)
	go ix.warm()
	return "", nil
}

// check compares an index's meta with the store. It returns why the index must be
// rebuilt ("" when it is complete), and the oldest change still queued.
func (x *Indexer) check(ctx context.Context, meta *Meta) (string, int64, error) {
	last, first, err := x.src.QueueBounds(ctx)
	if err != nil {
		return "", 0, err
	}
	count := int64(-1)
	if meta.Version == "" {
		if count, err = x.src.Count(ctx); err != nil {
			return "", 0, err
		}
	}
	switch {
	case meta.Version == "" && count == 0:
		// A new index of a store with nothing searchable is complete as it is; what is
		// still queued only drops messages.
		meta.Seq = first - 1
		return "", first, nil
	case meta.Version == "":
		return "new index", first, nil
	case meta.Version != Version:
		return "index version " + meta.Version + ", want " + Version, first, nil
	case meta.Store != x.store:
		return "index of another database", first, nil
	case meta.Seq < first-1:
		return fmt.Sprintf("index at change %d, but changes up to %d are gone from the queue", meta.Seq, first-1), first, nil
	case meta.Seq > last:
		return fmt.Sprintf("index at change %d is newer than the database (%d)", meta.Seq, last), first, nil
	}
	return "", first, nil
}

// use makes ix the index that searches read and batches go to; it holds the queue up to
// seq, on disk.
func (x *Indexer) use(ix *Index, seq int64) {
	x.mu.Lock()
	x.ix = ix
	x.mu.Unlock()
	x.applied.Store(seq)
	x.persisted.Store(seq)
	x.notify()
}

// Close stops the indexer and closes the index once what it applied is on disk. A
// degraded index is no error here: it is derived data, and the next start rebuilds it or
// replays the queue, which keeps every change the index did not have on disk.
func (x *Indexer) Close() error {
	if x.cancel == nil {
		return nil
	}
	x.cancel()
	<-x.done
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ix == nil {
		return nil
	}
	err := x.ix.Close()
	x.ix = nil
	return err
}

// loop gets the index ready (rebuild is why it must be rebuilt, err why Start could not
// open it), then applies the queue to it until ctx ends.
func (x *Indexer) loop(ctx context.Context, rebuild string, err error) {
	defer close(x.done)
	if x.prepare(ctx, rebuild, err) {
		x.follow(ctx)
	}
}

// prepare rebuilds the index if it must, and after a failure waits and opens it again
// until it serves: a failed rebuild leaves the old index as it was, so each attempt
// decides afresh what the index needs. It returns false if ctx ended first.
func (x *Indexer) prepare(ctx context.Context, rebuild string, err error) bool {
	for {
		stage := "open"
		if err == nil && rebuild != "" {
			stage, err = "rebuild", x.rebuild(ctx, rebuild)
		}
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			x.healed()
			return true
		}
		if !x.failed(ctx, stage, err) {
			return false
		}
		rebuild, err = x.open(ctx)
	}
}

// rebuild builds the index afresh from the store and puts it in use.
func (x *Indexer) rebuild(ctx context.Context, reason string) error {
	if !x.retrying() {
		x.log.Info("rebuilding the search index", "path", x.path, "reason", reason)
	}
	start := time.Now()
	n, err := Rebuild(ctx, x.path, x.src, nil)
	if err != nil {
		return err
	}
	ix, meta, err := Open(x.path)
	if err != nil {
		return fmt.Errorf("open after rebuild: %w", err)
	}
	ix.warm()
	x.use(ix, meta.Seq)
	x.log.Info("search index rebuilt", "messages", n, "duration_ms", time.Since(start).Milliseconds())
	return nil
}

// follow applies the queue to the index, every Poll or when a search waits, until ctx
// ends; a failed batch is tried again after a backoff.
func (x *Indexer) follow(ctx context.Context) {
	defer x.flush()
	tick := time.NewTicker(x.opt.Poll)
	defer tick.Stop()
	urgent := false // someone waits (CatchUp)
	for {
		err := x.drain(ctx, urgent)
		if ctx.Err() != nil {
			return
		}
		x.trim(ctx)
		if err != nil {
			if !x.failed(ctx, "update", err) {
				return
			}
			continue
		}
		x.healed()
		select {
		case <-ctx.Done():
			return
		case <-x.wake:
			urgent = true
		case <-tick.C:
			urgent = false
		}
	}
}

// drain applies batches until the queue is empty or its newest changes are held back.
func (x *Indexer) drain(ctx context.Context, urgent bool) error {
	for {
		n, deferred, err := x.step(ctx, urgent)
		if err != nil || n == 0 || deferred {
			return err
		}
	}
}

// flush waits (bounded) until what was applied is on disk, then trims the queue behind it,
// so a restart has little to replay.
func (x *Indexer) flush() {
	deadline := time.Now().Add(5 * time.Second)
	for x.persisted.Load() < x.applied.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	x.trim(ctx)
}

// readerHeartbeat is how often an index with nothing new to apply still records its
// cursor, so that the store does not take it for gone (db.ReaderRetention).
const readerHeartbeat = time.Hour

// trim records what the index has on disk as its cursor in the change log, which drops
// what every reader has passed. It is tried at every tick; a store that refuses it (a full
// disk) is logged when it starts refusing, not every tick.
func (x *Indexer) trim(ctx context.Context) {
	p := x.persisted.Load()
	if p <= x.trimmed && time.Since(x.trimmedAt) < readerHeartbeat {
		return
	}
	if err := x.src.Trim(ctx, x.reader, p); err != nil {
		if !x.trimFail {
			x.log.Warn("search index queue trim failed; retrying", "err", err)
		}
		x.trimFail = true
		return
	}
	x.trimmed, x.trimmedAt, x.trimFail = p, time.Now(), false
}

func (x *Indexer) notify() {
	x.mu.Lock()
	close(x.advanced)
	x.advanced = make(chan struct{})
	x.mu.Unlock()
}

// step applies one batch of queued changes; it returns how many it applied, and whether
// it held the newest ones back (see below) for the next tick.
func (x *Indexer) step(ctx context.Context, urgent bool) (int, bool, error) {
	changes, err := x.src.Changes(ctx, x.applied.Load(), x.opt.BatchSize)
	if err != nil || len(changes) == 0 {
		return 0, false, err
	}
	x.mu.Lock()
	ix := x.ix
	x.mu.Unlock()
	if ix == nil {
		return 0, false, ErrNotReady
	}
	atHead := len(changes) < x.opt.BatchSize
	byID, covered, err := x.docsFor(ctx, changes)
	if err != nil {
		return 0, false, err
	}
	atHead = atHead && len(covered) == len(changes)
	changes, deferred := x.holdBack(covered, byID, urgent || !atHead)
	if len(changes) == 0 {
		return 0, deferred, nil
	}
	bt := ix.NewBatch()
	for i, c := range changes {
		if c.Message == 0 {
			// A deleted inbox: apply what came before, then drop everything of the inbox
			// the index holds.
			if bt.Len() > 0 {
				if err := x.apply(ix, bt, changes[i-1].Seq); err != nil {
					return 0, false, err
				}
				bt = ix.NewBatch()
			}
			keys, err := ix.InboxDocs(ctx, c.Inbox)
			if err != nil {
				return 0, false, err
			}
			for _, k := range keys {
				bt.Delete(k[0], k[1])
			}
			if err := x.apply(ix, bt, c.Seq); err != nil {
				return 0, false, err
			}
			bt = ix.NewBatch()
			continue
		}
		if d, ok := byID[c.Message]; ok {
			bt.Put(d)
		} else {
			bt.Delete(c.TS, c.Message)
		}
	}
	if err := x.apply(ix, bt, changes[len(changes)-1].Seq); err != nil {
		return 0, false, err
	}
	return len(changes), deferred, nil
}

// docChunk is how many changes' documents one read fetches; docBudget bounds the text of
// the documents one step holds, so a step over large mail applies fewer changes.
const (
	docChunk  = 500
	docBudget = 64 << 20
)

// docsFor reads the documents of changes, a chunk at a time, until docBudget bytes of text
// are read. It returns them by message id, and the changes they cover (a prefix).
func (x *Indexer) docsFor(ctx context.Context, changes []Change) (map[int64]*Doc, []Change, error) {
	byID := make(map[int64]*Doc, len(changes))
	size := 0
	for start := 0; start < len(changes); start += docChunk {
		if size > docBudget {
			return byID, changes[:start], nil
		}
		var ids []int64
		for _, c := range changes[start:min(start+docChunk, len(changes))] {
			if c.Message != 0 {
				ids = append(ids, c.Message)
			}
		}
		docs, err := x.src.Docs(ctx, ids)
		if err != nil {
			return nil, nil, err
		}
		for i := range docs {
			byID[docs[i].ID] = &docs[i]
			size += len(docs[i].Body)
		}
	}
	return byID, changes, nil
}

// holdBack returns the changes to apply now. Fresh mail is triaged within a moment of
// its delivery, and the triage result changes its document, so a message indexed on
// arrival was most often indexed again a tick later: measured on SMTP ingest, a quarter
// of the documents were built twice. So when nobody waits (CatchUp) and the indexer is at
// the head of the queue, the changes from the first one read for the first time whose
// message still waits for triage are left for the next tick; by then that message's
// triage result is queued too, and it is indexed once. A change is held back at most
// once (it is no longer new at the next tick), so a slow triage delays it by one tick
// and no more; a search never waits for it, as it matches the changes the index does not
// hold yet itself (tail.go).
func (x *Indexer) holdBack(changes []Change, byID map[int64]*Doc, applyAll bool) ([]Change, bool) {
	seen := x.seen
	x.seen = max(x.seen, changes[len(changes)-1].Seq)
	if applyAll {
		return changes, false
	}
	for i, c := range changes {
		if d := byID[c.Message]; c.Seq > seen && d != nil && d.TriagePending {
			return changes[:i], true
		}
	}
	return changes, false
}

func (x *Indexer) apply(ix *Index, bt *Batch, seq int64) error {
	err := ix.Apply(bt, seq, x.store, func(err error) {
		if err == nil {
			for {
				p := x.persisted.Load()
				if p >= seq || x.persisted.CompareAndSwap(p, seq) {
					return
				}
			}
		}
	})
	if err != nil {
		return err
	}
	x.applied.Store(seq)
	x.notify()
	return nil
}

// DocCount returns how many messages the index holds.
func (x *Indexer) DocCount() (uint64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ix == nil {
		return 0, ErrNotReady
	}
	return x.ix.DocCount()
}

func (x *Indexer) ready() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.ix != nil
}

// Applied returns the last queue sequence number the index holds.
func (x *Indexer) Applied() int64 { return x.applied.Load() }

// CatchUp waits, at most the configured bound, until the index holds every change
// committed before the call. It reports whether it caught up.
func (x *Indexer) CatchUp(ctx context.Context) (bool, error) {
	want, err := x.src.LastSeq(ctx)
	if err != nil {
		return false, err
	}
	return x.waitFor(ctx, want)
}

// waitFor waits, at most the configured bound, until the index holds the change with
// sequence number want, waking the indexer if it does not yet.
func (x *Indexer) waitFor(ctx context.Context, want int64) (bool, error) {
	if x.ready() && x.applied.Load() >= want {
		return true, nil
	}
	select {
	case x.wake <- struct{}{}:
	default:
	}
	timer := time.NewTimer(x.opt.Wait)
	defer timer.Stop()
	for {
		x.mu.Lock()
		ch := x.advanced
		x.mu.Unlock()
		if x.ready() && x.applied.Load() >= want {
			return true, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Search answers one page of a search, with every change to the inbox committed before
// the call: from the index, and from the store for the changes the index does not hold
// yet (tail.go). When those are too many, or the index is being rebuilt, it waits
// (bounded) for the indexer instead, or answers ErrNotReady if the index is degraded.
func (x *Indexer) Search(ctx context.Context, req Request) ([]Hit, bool, error) {
	// Changes up to applied are in the index (applied is read before the snapshot is
	// taken); the tail read sees every change committed before it, so none can slip
	// between the two.
	var t *tail
	ok := x.ready()
	if ok {
		var err error
		if t, ok, err = x.tailOf(ctx, req.Inbox); err != nil {
			return nil, false, err
		}
	}
	if !ok {
		// A degraded index will not catch up within the wait, and what it holds is
		// missing the changes it failed to apply: the search is asked again later.
		if x.Degraded() {
			return nil, false, ErrNotReady
		}
		if _, err := x.CatchUp(ctx); err != nil {
			return nil, false, err
		}
	}
	x.mu.Lock()
	ix := x.ix
	x.mu.Unlock()
	if ix == nil {
		return nil, false, ErrNotReady
	}
	// A phrase in the body is checked against the stored text for the hits of the page
	// (the index holds a filter of each message's word pairs, not their positions).
	return ix.searchPage(ctx, req, func(ctx context.Context, ids []int64) ([]Doc, error) {
		return x.src.Docs(ctx, ids)
	}, t)
}
