// Command triagebench measures the built-in triage model on the mail the SMTP and
// whole-server benchmarks send (benchkit's company corpus: ~1,800-byte bodies, their
// subjects and senders), away from the server: the CPU time of Predict a message, one
// goroutine, in passes over the same messages (the first pass fills the model's cache of
// words outside its vocabulary). With -bits it prints every answer's probabilities as
// float64 bits instead, so that two builds can be compared with cmp for answers that
// must not change.
//
//	go run -tags 'sqlite_omit_load_extension osusergo netgo' ./scripts/triagebench [-n 5000] [-passes 4]
//	go run ... ./scripts/triagebench -bits -n 24000 > answers.txt
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/inboxd/inboxd/mail/triage"
	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

func main() {
	n := flag.Int("n", 5000, "messages (with -bits: of each of the corpus seeds 1 and 2)")
	passes := flag.Int("passes", 4, "passes over the messages when timing")
	bits := flag.Bool("bits", false, "print the answers as float64 bits instead of timing")
	flag.Parse()
	benchkit.OwnRuntime()
	b, err := triage.NewBuiltin()
	if err != nil {
		log.Fatal(err)
	}
	if *bits {
		if err := printAnswers(b, *n); err != nil {
			log.Fatal(err)
		}
		return
	}
	ins := companyMail(1, *n)
	fmt.Printf("triagebench: %d messages of company mail, one goroutine; load average %s\n", *n, benchkit.LoadAvg())
	for pass := range *passes {
		start := cpuTime()
		for _, in := range ins {
			b.Predict(in)
		}
		fmt.Printf("  pass %d: %.1f us of CPU a message\n", pass+1, float64((cpuTime()-start).Nanoseconds())/1e3/float64(len(ins)))
	}
}

// companyMail returns n inputs drawn from the company corpus of seed, as smtpbench writes
// its messages (to eight inboxes, a minute apart).
func companyMail(seed uint64, n int) []triage.Input {
	c := benchkit.CompanyMail(seed)
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	ins := make([]triage.Input, n)
	for i := range ins {
		var body bytes.Buffer
		benchkit.WriteWrapped(&body, 1800, c.Word)
		text := strings.ReplaceAll(body.String(), "\r\n", "\n")
		s := c.Sender()
		from := fmt.Sprintf("%q <%s>", s.Name, s.Addr)
		to := []string{fmt.Sprintf("inbox%d@bench.test", i%8)}
		ins[i] = triage.NewInput(from, to, nil, c.Subject(), at.Add(time.Duration(i)*time.Minute), text)
	}
	return ins
}

// printAnswers writes, for n messages of each of the seeds 1 and 2, the message's number,
// its token count and every probability's bits.
func printAnswers(b *triage.Builtin, n int) error {
	w := bufio.NewWriter(os.Stdout)
	for seed := uint64(1); seed <= 2; seed++ {
		for i, in := range companyMail(seed, n) {
			sc := b.Predict(in)
			fmt.Fprintf(w, "%d %d", i, sc.InputTokens)
			for _, p := range sc.Category {
				fmt.Fprintf(w, " %x", math.Float64bits(p))
			}
			fmt.Fprintf(w, " %x", math.Float64bits(sc.NeedsReply))
			for _, p := range sc.Urgency {
				fmt.Fprintf(w, " %x", math.Float64bits(p))
			}
			fmt.Fprintln(w)
		}
	}
	return w.Flush()
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
