// Command resetbench measures the test controls' reset (extensions section 6, issue 28's
// target): a server started with the demo set and --test-controls receives -extra
// messages (injected, untimed), then POST /_inboxd/reset is timed until it answers, with
// the search index caught up; -n rounds. It reports the reset's p50, p99 and max, and the
// server's CPU per reset.
//
//	go build -tags '...' -o /tmp/inboxd . && go run ./scripts/resetbench -bin /tmp/inboxd
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

func main() {
	bin := flag.String("bin", "", "inboxd binary (required)")
	n := flag.Int("n", 30, "resets")
	extra := flag.Int("extra", 1000, "messages injected before each reset")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "resetbench: -bin is required")
		os.Exit(2)
	}
	if err := run(*bin, *n, *extra); err != nil {
		fmt.Fprintln(os.Stderr, "resetbench:", err)
		os.Exit(1)
	}
}

var listening = regexp.MustCompile(`listening on (\S+)`)

func run(bin string, n, extra int) error {
	dir, err := os.MkdirTemp("", "resetbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(bin, "serve", "--db", filepath.Join(dir, "bench.db"), "--http", "127.0.0.1:0", "--domain", "inboxd.test",
		"--demo", "--test-controls", "--dns", "off")
	benchkit.DieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	base := ""
	sc := bufio.NewScanner(out)
	for base == "" && sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			base = "http://" + m[1]
		}
	}
	go io.Copy(io.Discard, out)
	if base == "" {
		return fmt.Errorf("the server did not start")
	}
	const inbox = "support%40inboxd.test" // the demo set's first inbox, on --domain inboxd.test
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var took []time.Duration
	var cpu time.Duration
	for round := range n {
		if err := inject(client, base, inbox, extra, round); err != nil {
			return err
		}
		before, err := benchkit.UsageOf(cmd.Process.Pid)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := post(client, base+"/_inboxd/reset", nil); err != nil {
			return err
		}
		took = append(took, time.Since(start))
		after, err := benchkit.UsageOf(cmd.Process.Pid)
		if err != nil {
			return err
		}
		cpu += after.CPU - before.CPU
	}
	slices.Sort(took)
	fmt.Printf("reset with the demo set and %d extra messages, %d rounds (load %s): p50 %.1f ms, p99 %.1f ms, max %.1f ms; server CPU %.1f ms per reset\n",
		extra, n, benchkit.LoadAvg(), benchkit.Ms(benchkit.Pct(took, 50)), benchkit.Ms(benchkit.Pct(took, 99)),
		benchkit.Ms(took[len(took)-1]), benchkit.Ms(cpu/time.Duration(n)))
	return nil
}

// inject delivers count messages to inbox over 8 connections.
func inject(client *http.Client, base, inbox string, count, round int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < count; i += 8 {
				body := map[string]any{"from": "sender@customer.example", "subject": fmt.Sprintf("extra %d-%d", round, i),
					"text": "a message the reset takes away again"}
				if err := post(client, base+"/_inboxd/inboxes/"+inbox+"/messages", body); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func post(client *http.Client, url string, body any) error {
	b, _ := json.Marshal(body)
	if body == nil {
		b = nil
	}
	req, err := http.NewRequest("POST", url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return fmt.Errorf("POST %s: %d %s", url, res.StatusCode, msg)
	}
	return nil
}
