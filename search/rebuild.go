package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// RebuildBatch is how many messages go into one segment during a rebuild: larger batches
// mean fewer, larger segments and less merging.
const RebuildBatch = 2000

// Rebuild builds the index at path from scratch out of src and returns how many messages
// it holds. It builds beside the old index and swaps it in at the end, so a failure or
// crash leaves the old index as it was. progress, if set, is called as messages are
// indexed (done of total).
//
// It fails if another process (a running server) has the index open.
func Rebuild(ctx context.Context, path string, src Source, progress func(done, total int64)) (int64, error) {
	if _, err := os.Stat(path); err == nil {
		ix, _, err := Open(path)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return 0, err // in use by a server, most likely
		}
		if ix != nil {
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
	total, err := src.Count(ctx)
	if err != nil {
		return 0, err
	}
	// A rebuild holds several batches of documents and the segments built from them,
	// hundreds of megabytes at once: under the server's soft memory limit (gc.go in
	// package main) the collector ran without pause, and 100,000 messages took 50 s
	// instead of 13 s. The limit is lifted while the rebuild runs, and put back after.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
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
			err = <-persisted
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
				if err := ix.b.Batch(bt.b); err != nil || bt.err != nil {
					mu.Lock()
					applyErr = errors.Join(applyErr, err, bt.err)
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
