package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// RebuildBatch is how many messages go into one segment during a rebuild: larger batches
// mean fewer, larger segments and less merging.
const RebuildBatch = 2000

// Rebuild builds the index at path from scratch out of src and returns how many messages
// it holds. It builds beside the old index and swaps it in at the end, so a failure or
// crash leaves the old index as it was. progress, if set, is called as messages are
// indexed (done of total).
//
// It fails if another process (a running server) has the index open, and as soon as a
// part of the new index cannot be written (a full disk) rather than wait for room.
func Rebuild(ctx context.Context, path string, src Source, progress func(done, total int64)) (int64, error) {
	oldSeq := int64(math.MaxInt64) // where the index being replaced stands, if any
	if _, err := os.Stat(path); err == nil {
		ix, meta, err := Open(path)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return 0, err // in use by a server, most likely
		}
		if ix != nil {
			oldSeq = meta.Seq
			ix.Close()
		}
	}
	store, err := src.StoreID(ctx)
	if err != nil {
		return 0, err
	}
	// Changes committed from here on are replayed from the queue after the rebuild;
	// replaying one the scan already saw is harmless.
	seq, err := src.LastSeq(ctx)
	if err != nil {
		return 0, err
	}
	// The rebuilt index follows the log from seq, so the store must keep what comes after
	// it from now on; the old index, kept if the rebuild fails, may need more.
	reader, err := readerID(path)
	if err != nil {
		return 0, err
	}
	if err := src.Trim(ctx, reader, min(oldSeq, seq)); err != nil {
		return 0, err
	}
	total, err := src.Count(ctx)
	if err != nil {
		return 0, err
	}
	tmp := path + ".rebuild"
	if err := os.RemoveAll(tmp); err != nil {
		return 0, err
	}
	ix, _, err := Open(tmp)
	if err != nil {
		return 0, err
	}
	n, err := fill(ctx, ix, src, total, progress)
	if err == nil {
		// The last batch records where the queue stands; once it is on disk, so is
		// everything before it.
		persisted := make(chan error, 1)
		if err = ix.Apply(ix.NewBatch(), seq, store, func(err error) { persisted <- err }); err == nil {
			err = waitPersisted(ctx, ix, persisted)
		}
	}
	if cerr := ix.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(tmp)
		return 0, err
	}
	old := path + ".old"
	os.RemoveAll(old)
	if err := os.Rename(path, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, err
	}
	os.RemoveAll(old)
	return n, nil
}

// errNotWritten is a rebuild's failure to write the index to disk. bleve does not say why
// (it keeps retrying); a full disk is the likely cause.
var errNotWritten = errors.New("search: rebuild: the index could not be written to disk (is it full?)")

// waitPersisted waits for the persisted callback of a rebuild's last batch. It stops
// early when ctx ends (a server stopping), or when bleve failed to write any of the new
// index: bleve would retry that, without pause, until the disk had room, and the
// callback would wait as long. The rebuild fails instead, its files are removed, and the
// indexer tries it again later (retry.go).
func waitPersisted(ctx context.Context, ix *Index, persisted <-chan error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-persisted:
			return err
		case <-ctx.Done():
			return fmt.Errorf("search: rebuild: %w", ctx.Err())
		case <-tick.C:
			if err := notWritten(ix); err != nil {
				return err
			}
		}
	}
}

// notWritten returns errNotWritten once bleve failed to write any part of ix.
func notWritten(ix *Index) error {
	if ix.persistFailures() > 0 {
		return errNotWritten
	}
	return nil
}

// fill indexes every searchable message of src: one goroutine reads the store in row id
// order while the others build segments side by side (building a segment is the costly
// part, and it runs on one core per batch).
func fill(ctx context.Context, ix *Index, src Source, total int64, progress func(done, total int64)) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []Doc, 2)
	var readErr error
	go func() {
		defer close(pages)
		var after int64
		for {
			docs, err := src.Scan(ctx, after, RebuildBatch)
			if err != nil {
				readErr = err
				return
			}
			if len(docs) == 0 {
				return
			}
			after = docs[len(docs)-1].ID
			select {
			case pages <- docs:
			case <-ctx.Done():
				return
			}
		}
	}()
	var done atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var applyErr error
	workers := max(1, min(runtime.GOMAXPROCS(0), 4))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for docs := range pages {
				bt := ix.NewBatch()
				for i := range docs {
					bt.Put(&docs[i])
				}
				// Once a segment could not be written the rest would only be held in
				// memory until the rebuild fails at the end: it fails now.
				if err := errors.Join(ix.b.Batch(bt.b), bt.err, notWritten(ix)); err != nil {
					mu.Lock()
					applyErr = errors.Join(applyErr, err)
					mu.Unlock()
					cancel()
					return
				}
				d := done.Add(int64(len(docs)))
				if progress != nil {
					mu.Lock()
					progress(d, total)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if applyErr != nil {
		return 0, applyErr
	}
	if readErr != nil {
		return 0, readErr
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("search: rebuild: %w", err)
	}
	return done.Load(), nil
}
