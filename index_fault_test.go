package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// TestSearchIndexHealsWhileServing starts the server where the search index cannot be
// created: a dangling symlink in the place of its directory (a full disk or a directory
// the server may not write behave alike, but a test run as root writes anywhere). The
// server starts anyway and mail goes on; /healthz answers 200, searches 503 transient,
// /metrics says the index is degraded, and Close in that state reports no error (SIGTERM
// exits 0). Once the path is usable the index heals by itself, without a restart: the
// search finds the mail and /metrics says so.
func TestSearchIndexHealsWhileServing(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "inboxd.db")
	c.Assert(os.Symlink(filepath.Join(dir, "gone", "index"), indexPath(dbPath)), qt.IsNil)
	seed := writeFixture(t, dir)
	var s *faultServer
	search := func() (int, []byte) {
		return s.do("GET", "/v1/inboxes/agent%40inboxd.test/messages/search?query=celeriac", nil)
	}
	start := func() *Main {
		m := &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", DNS: "off", Seeds: []string{seed}}
		c.Assert(m.Run(context.Background()), qt.IsNil)
		t.Cleanup(func() { m.Close() })
		s = &faultServer{t: t, m: m, base: "http://" + m.Addr()}
		status, body := search()
		unavailable(t, status, body)
		status, _ = get(t, s.base+"/healthz", "")
		c.Assert(status, qt.Equals, 200)
		waitForMetric(t, s.base, "inboxd_search_index_degraded", 1)
		c.Assert(metric(t, s.base, "inboxd_search_index_failures_total") >= 1, qt.IsTrue)
		return m
	}
	m := start()
	status, body := s.do("POST", "/v1/inboxes/agent%40inboxd.test/messages/send", map[string]any{
		"to": []string{"sink@inboxd.test"}, "subject": "Celeriac report", "text": "hi", "idempotencyKey": "celeriac"})
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	c.Assert(m.Close(), qt.IsNil)

	m = start()
	c.Assert(os.Remove(indexPath(dbPath)), qt.IsNil)
	waitForMetric(t, s.base, "inboxd_search_index_degraded", 0)
	status, body = search()
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	var page struct{ Messages []struct{ Subject string } }
	c.Assert(json.Unmarshal(body, &page), qt.IsNil)
	c.Assert(page.Messages, qt.HasLen, 1)
	c.Assert(page.Messages[0].Subject, qt.Equals, "Celeriac report")
	c.Assert(m.Close(), qt.IsNil)
}

// metric reads one unlabelled series from GET /metrics (-1 when it is absent).
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	status, body := get(t, base+"/metrics", "")
	qt.Assert(t, status, qt.Equals, 200)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	qt.Assert(t, err, qt.IsNil)
	return v
}

// waitForMetric waits up to 30 s (the index's first retries come within seconds) for
// an unlabelled series to read want.
func waitForMetric(t *testing.T, base, name string, want float64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); metric(t, base, name) != want; time.Sleep(20 * time.Millisecond) {
		qt.Assert(t, time.Now().Before(deadline), qt.IsTrue, qt.Commentf("%s never %v", name, want))
	}
}

// TestRealFullDiskIndexRebuild is the case an operator met: the index must be rebuilt at
// start (here it was deleted) while the disk is full, on a small tmpfs where mounting
// works. The rebuild fails, and is tried again: /healthz answers 200, searches 503
// transient, /metrics says degraded, and SIGTERM exits 0. Once space is freed the index
// is built without a restart and holds every searchable message.
func TestRealFullDiskIndexRebuild(t *testing.T) {
	t.Parallel()
	bin := crashBinary(t)
	dir := t.TempDir()
	mnt := mountTmpfs(t, dir, "32m")
	r := &rig{t: t, bin: bin, dbPath: filepath.Join(mnt, "inboxd.db"), seed: writeFixture(t, dir), client: &http.Client{Timeout: 30 * time.Second}}
	p := r.start()
	const sent = 40
	for i := range sent {
		r.must(p, 200, "POST", inboxURL("agent@inboxd.test")+"/messages/send", map[string]any{"to": []string{"sink@inboxd.test"},
			"subject": fmt.Sprintf("rebuildtoken %d", i), "text": noise(32 << 10), "idempotencyKey": fmt.Sprint(i)}, nil)
	}
	r.drain(p)
	r.stop(p)
	index := r.dbPath + ".index"
	size := dirSize(t, index)
	qt.Assert(t, os.RemoveAll(index), qt.IsNil)
	// Fill the disk but for a quarter of what the index took: enough for the database's
	// writes at start, too little for the rebuilt index.
	var st syscall.Statfs_t
	qt.Assert(t, syscall.Statfs(mnt, &st), qt.IsNil)
	filler := filepath.Join(mnt, "filler")
	qt.Assert(t, os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-size/4), 0o600), qt.IsNil)

	degraded := func() *proc {
		p := r.start()
		for deadline := time.Now().Add(30 * time.Second); r.metrics(p)["inboxd_search_index_degraded"] != 1; time.Sleep(50 * time.Millisecond) {
			qt.Assert(t, time.Now().Before(deadline), qt.IsTrue, qt.Commentf("never degraded:\n%s", p.log))
		}
		status, body := get(t, p.api+inboxURL("agent@inboxd.test")+"/messages/search?query=rebuildtoken", crashKey)
		unavailable(t, status, body)
		status, _ = get(t, p.api+"/healthz", "")
		qt.Assert(t, status, qt.Equals, 200)
		return p
	}
	r.stop(degraded()) // exits 0
	p = degraded()
	qt.Assert(t, os.Remove(filler), qt.IsNil)
	m := r.drain(p) // the index answers and holds everything queued
	qt.Assert(t, m["inboxd_search_index_degraded"], qt.Equals, 0.0)
	qt.Assert(t, r.search(p, "agent@inboxd.test", "rebuildtoken"), qt.HasLen, sent)
	r.checkIndex(p)
	r.stop(p)
}

// mountTmpfs mounts a tmpfs of size (such as "3m") at dir/fs until the test ends, and
// returns its path. Mounting needs root (or CAP_SYS_ADMIN); elsewhere it skips t.
func mountTmpfs(t *testing.T, dir, size string) string {
	t.Helper()
	mnt := filepath.Join(dir, "fs")
	qt.Assert(t, os.Mkdir(mnt, 0o755), qt.IsNil)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	return mnt
}

// dirSize is the bytes of the files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	qt.Assert(t, err, qt.IsNil)
	return n
}
