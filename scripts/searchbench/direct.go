package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/inboxd/inboxd/search"
)

// runDirect indexes the corpus straight into a search index (no store, no HTTP) and times
// queries against it: the index's own share of the end-to-end figures.
var batchN = envInt("BATCH", 1000)

func envInt(k string, d int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return d
}

func runDirect(n int, dir string) error {
	c := newCorpus(1, 300)
	path := filepath.Join(dir, "direct.index")
	os.RemoveAll(path)
	ix, _, err := search.Open(path)
	if err != nil {
		return err
	}
	start := time.Now()
	bodyBytes := 0
	bt := ix.NewBatch()
	var applyTime time.Duration
	for i := 0; i < n; i++ {
		m := c.message(i, n, "bench@inboxd.test")
		bodyBytes += len(m.body)
		d := &search.Doc{ID: int64(i + 1), Inbox: 1, TS: m.ts.UnixMilli(), Subject: m.subject,
			From: m.from.Name + " <" + m.from.Addr + ">", To: m.to, Body: m.body, Attachments: m.attachments,
			Category: m.category, Urgency: m.urgency}
		bt.Put(d)
		if bt.Len() == batchN {
			t := time.Now()
			if err := ix.Apply(bt, int64(i), "x", nil); err != nil {
				return err
			}
			applyTime += time.Since(t)
			bt = ix.NewBatch()
		}
	}
	done := make(chan error, 1)
	if err := ix.Apply(bt, int64(n), "x", func(err error) { done <- err }); err != nil {
		return err
	}
	t := time.Now()
	<-done
	fmt.Printf("apply %v, final persist %v\n", applyTime, time.Since(t))
	el := time.Since(start)
	fmt.Printf("indexed %d in %v (%.0f msg/s), bodies %d MB\n", n, el, float64(n)/el.Seconds(), bodyBytes>>20)
	time.Sleep(3 * time.Second)
	fmt.Printf("index size %d MB\n", dirSize(path)>>20)
	if os.Getenv("NOQ") != "" {
		return ix.Close()
	}
	qs := c.queries(200)
	for _, kind := range []string{"one", "two", "rphrase", "from", "common"} {
		var lat []time.Duration
		for _, q := range qs[kind] {
			t := time.Now()
			hits, _, err := ix.Search(context.Background(), search.Request{Inbox: 1, Query: search.Parse(q), Limit: 20})
			if err != nil {
				return err
			}
			_ = hits
			lat = append(lat, time.Since(t))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		fmt.Printf("%-7s n=%d p50=%v p99=%v max=%v\n", kind, len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	}
	return ix.Close()
}

func dirSize(path string) int64 {
	var n int64
	filepath.Walk(path, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
