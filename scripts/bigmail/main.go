// Command bigmail measures what large mail costs inboxd (BENCHMARKS.md, "Large mail"): n
// SMTP clients each send one message of about size MiB at the same moment (a short text
// and a binary attachment, base64-encoded as mail clients do), while API clients read in a
// loop. It reports the server's peak resident memory (VmHWM), its CPU time, the SMTP
// replies, the API's latency and errors, and checks that every message answered 250 is
// stored intact: its attachment, downloaded through its signed link, has the bytes that
// were sent.
//
// With several binaries (-bin old=/tmp/a,new=/tmp/b) it runs them in turns, a b b a ...,
// each on a fresh database, so that the comparison sees the same machine.
//
//	go run ./scripts/bigmail -bin new=/tmp/inboxd -n 60 -size 24
//
// scripts/bigmail.sh builds the binary and runs it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

func main() {
	benchkit.OwnRuntime()
	var o options
	bins := flag.String("bin", "", "binaries to compare, name=path,name=path (required)")
	flag.IntVar(&o.n, "n", 60, "concurrent SMTP clients, one message each")
	flag.IntVar(&o.sizeMiB, "size", 24, "message size in MiB (the server takes up to 25)")
	flag.IntVar(&o.readers, "api", 4, "API clients reading in a loop meanwhile")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds; each runs every binary, in the order a b, then b a, ...")
	extra := flag.String("server-args", "", "extra arguments for inboxd serve, space separated")
	flag.Parse()
	for _, kv := range strings.Split(*bins, ",") {
		name, path, ok := strings.Cut(kv, "=")
		if !ok || name == "" || path == "" {
			fmt.Fprintln(os.Stderr, "bigmail: -bin wants name=path[,name=path...]")
			os.Exit(2)
		}
		o.bins = append(o.bins, binary{name, path})
	}
	o.extra = strings.Fields(*extra)
	fmt.Printf("| binary | messages | 250 | other replies | stored intact | elapsed s | VmHWM MB | server CPU s | API reads | API p50 ms | API p99 ms | API errors |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	failed := false
	for r := range o.rounds {
		order := slices.Clone(o.bins)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, b := range order {
			res, err := trial(b, o)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bigmail: %s: %v\n", b.name, err)
				failed = true
				continue
			}
			fmt.Println(res.row(b.name, o.n))
			failed = failed || res.intact != res.accepted
		}
	}
	if failed {
		os.Exit(1)
	}
}

type binary struct{ name, path string }

type options struct {
	bins                []binary
	extra               []string
	n, sizeMiB, readers int
	rounds              int
}

type result struct {
	accepted, intact int
	others           map[string]int
	elapsed          time.Duration
	hwm              int64
	cpu              time.Duration
	reads            []time.Duration
	readErrors       int
}

func (r result) row(name string, n int) string {
	var others []string
	for k, v := range r.others {
		others = append(others, fmt.Sprintf("%d × %s", v, k))
	}
	slices.Sort(others)
	slices.Sort(r.reads)
	return fmt.Sprintf("| %s | %d | %d | %s | %d | %.1f | %d | %.1f | %d | %.1f | %.1f | %d |", name, n, r.accepted,
		strings.Join(others, "; "), r.intact, r.elapsed.Seconds(), r.hwm>>20, r.cpu.Seconds(), len(r.reads),
		benchkit.Ms(benchkit.Pct(r.reads, 50)), benchkit.Ms(benchkit.Pct(r.reads, 99)), r.readErrors)
}

const inbox = "big@inboxd.test"

// trial starts b on a fresh database, sends the mail, checks it and stops the server.
func trial(b binary, o options) (result, error) {
	var res result
	dir, err := os.MkdirTemp("", "bigmail-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	dns, stopDNS, err := benchkit.FakeDNS()
	if err != nil {
		return res, err
	}
	defer stopDNS()
	// Every sender connects from 127.0.0.1: allow it them all (the senders of a real
	// burst come from many addresses); a binary from before the limit has no such flag.
	extra := o.extra
	if help, _ := exec.Command(b.path, "serve", "-h").CombinedOutput(); bytes.Contains(help, []byte("-smtp-max-per-ip")) {
		extra = append([]string{"--smtp-max-per-ip", strconv.Itoa(o.n)}, extra...)
	}
	srv, err := benchkit.StartServer(b.path, dir, dns, "", extra)
	if err != nil {
		return res, err
	}
	defer srv.Stop()
	ctx := context.Background()
	if err := srv.API.Do(ctx, "POST", "/v1/inboxes", map[string]any{"username": "big"}, nil); err != nil {
		return res, err
	}
	small, err := seed(srv)
	if err != nil {
		return res, err
	}
	stopReads := readLoop(ctx, srv.API, small, o.readers)
	start := time.Now()
	sent := sendAll(srv.SMTP, o.n, o.sizeMiB<<20)
	res.elapsed = time.Since(start)
	res.reads, res.readErrors = stopReads()
	pid := srv.Cmd.Process.Pid
	if u, err := benchkit.UsageOf(pid); err == nil {
		res.cpu = u.CPU
	}
	res.others = map[string]int{}
	for _, s := range sent {
		switch {
		case s.err != nil:
			res.others["error: "+s.err.Error()]++
		case strings.HasPrefix(s.reply, "250"):
			res.accepted++
			if ok, err := intact(ctx, srv.API, s); err != nil {
				return res, err
			} else if ok {
				res.intact++
			}
		default:
			res.others[s.reply]++
		}
	}
	res.hwm, err = peakResident(pid)
	return res, err
}

// seed stores a few small messages for the readers, and returns their Message-IDs.
func seed(srv *benchkit.Server) ([]string, error) {
	var ids []string
	var msgs [][]byte
	var to []string
	for i := range 20 {
		id := fmt.Sprintf("<small-%d@%s>", i, benchkit.SenderDomain)
		msgs = append(msgs, []byte(header(i, id, "text/plain; charset=utf-8")+"A small message to read while large ones arrive.\r\n"))
		to, ids = append(to, inbox), append(ids, id)
	}
	_, err := benchkit.Ingest(srv.SMTP, msgs, to, 1, 0)
	return ids, err
}

func header(i int, id, ctype string) string {
	return fmt.Sprintf("From: \"Customer %d\" <sender%d@%s>\r\nTo: <%s>\r\nSubject: Large file %d\r\nDate: %s\r\nMessage-ID: %s\r\nMIME-Version: 1.0\r\nContent-Type: %s\r\n\r\n",
		i, i, benchkit.SenderDomain, inbox, i, time.Now().Format(time.RFC1123Z), id, ctype)
}

// readLoop starts clients that read the inbox's list and messages until the returned
// function stops them; it returns each read's latency and how many failed.
func readLoop(ctx context.Context, api *benchkit.API, ids []string, clients int) func() ([]time.Duration, int) {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for i := 0; ctx.Err() == nil; i++ {
				path := benchkit.InboxPath(inbox) + "/messages?limit=10"
				if i%2 == 1 {
					path = benchkit.InboxPath(inbox) + "/messages/" + url.PathEscape(ids[rng.IntN(len(ids))])
				}
				t := time.Now()
				err := api.Do(ctx, "GET", path, nil, nil)
				d := time.Since(t)
				mu.Lock()
				if err != nil && ctx.Err() == nil {
					errs++
				} else if err == nil {
					lat = append(lat, d)
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // a client's pace, not a flood
			}
		}()
	}
	return func() ([]time.Duration, int) {
		cancel()
		wg.Wait()
		return lat, errs
	}
}

// sent is one large message and what became of it.
type sent struct {
	id    string
	sum   [32]byte // of the attachment's bytes
	size  int
	reply string
	err   error
}

// sendAll sends n messages of about size bytes over n connections at once.
func sendAll(addr string, n, size int) []sent {
	out := make([]sent, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &out[i]
			s.id = fmt.Sprintf("<large-%d-%d@%s>", i, time.Now().UnixNano(), benchkit.SenderDomain)
			s.reply, s.err = benchkit.SendOne(addr, fmt.Sprintf("sender%d@%s", i, benchkit.SenderDomain), inbox, 10*time.Minute,
				func(w *bufio.Writer) error { return writeLarge(w, i, s, size) })
		}()
	}
	wg.Wait()
	return out
}

// writeLarge writes a message of about size bytes: a text part and an attachment of
// random bytes, base64 in lines of 76 characters, made as it is written.
func writeLarge(w *bufio.Writer, i int, s *sent, size int) error {
	const boundary = "bigmail-boundary"
	w.WriteString(header(i, s.id, "multipart/mixed; boundary=\""+boundary+"\""))
	fmt.Fprintf(w, "--%s\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe report is attached.\r\n", boundary)
	fmt.Fprintf(w, "--%s\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"report-%d.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n", boundary, i)
	s.size = (size - 1024) / 78 * 57 // 57 bytes make a 76-character line and its CRLF
	rng := rand.NewChaCha8([32]byte{byte(i), byte(i >> 8)})
	h := sha256.New()
	raw := make([]byte, 57*64)
	line := make([]byte, 0, 78*64)
	for left := s.size; left > 0; {
		n := min(left, len(raw))
		rng.Read(raw[:n])
		h.Write(raw[:n])
		line = line[:0]
		for k := 0; k < n; k += 57 {
			line = base64.StdEncoding.AppendEncode(line, raw[k:min(k+57, n)])
			line = append(line, '\r', '\n')
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		left -= n
	}
	copy(s.sum[:], h.Sum(nil))
	_, err := fmt.Fprintf(w, "--%s--\r\n", boundary)
	return err
}

// intact reports whether the message s is stored with its attachment's bytes unchanged.
func intact(ctx context.Context, api *benchkit.API, s sent) (bool, error) {
	var m struct {
		Attachments []struct {
			AttachmentID string `json:"attachmentId"`
			Size         int    `json:"size"`
		} `json:"attachments"`
	}
	base := benchkit.InboxPath(inbox) + "/messages/" + url.PathEscape(s.id)
	if err := api.Do(ctx, "GET", base, nil, &m); err != nil {
		return false, err
	}
	if len(m.Attachments) != 1 || m.Attachments[0].Size != s.size {
		return false, nil
	}
	var link struct {
		URL string `json:"downloadUrl"`
	}
	if err := api.Do(ctx, "GET", base+"/attachments/"+m.Attachments[0].AttachmentID, nil, &link); err != nil {
		return false, err
	}
	res, err := http.Get(link.URL)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, res.Body); err != nil {
		return false, err
	}
	return res.StatusCode == 200 && [32]byte(h.Sum(nil)) == s.sum, nil
}

// peakResident is the process's peak resident set (VmHWM) in bytes.
func peakResident(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
