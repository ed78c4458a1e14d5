// Command eventbench measures inboxd's events (extensions sections 3-5) end to end, on the
// binary it is given, each measurement on a fresh server and database:
//
//   - latency: mail arrives over SMTP at -rate messages a second while one webhook (a
//     receiver on 127.0.0.1) and -streams open event streams listen; for every message, the
//     time from the SMTP 250 to its email.received on each stream and at the webhook.
//
//   - ingest: SMTP ingest as fast as the server takes it, without listeners and with one
//     webhook and -streams streams, in turns (bare, listened, listened, bare; -turns
//     times): the rates, their ratio and the server's CPU per message.
//
//   - idle: -idle open streams and -idle waits on a server that receives nothing: how much
//     resident memory they add and how much CPU the server uses meanwhile.
//
//     go build -tags '...' -o /tmp/inboxd . && go run ./scripts/eventbench -bin /tmp/inboxd
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
)

type options struct {
	bin                   string
	rate                  float64
	seconds, streams      int
	hooks                 int
	n, conns, size, idle  int
	inboxes               int
	only                  string
	extra                 []string
	idleSeconds, settleMs int
	turns                 int
	profile               string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "inboxd binary to start (required)")
	flag.Float64Var(&o.rate, "rate", 500, "latency: SMTP messages a second")
	flag.IntVar(&o.seconds, "seconds", 20, "latency: how long mail arrives")
	flag.IntVar(&o.streams, "streams", 10, "open event streams beside the webhook (latency and ingest)")
	flag.IntVar(&o.hooks, "hooks", 1, "webhooks to the local receiver (latency and ingest; 0 or 1)")
	flag.IntVar(&o.n, "n", 12000, "ingest: messages per run")
	flag.IntVar(&o.turns, "turns", 1, "ingest: how many times the turns bare, listened, listened, bare are run")
	flag.IntVar(&o.conns, "conns", 8, "concurrent SMTP connections")
	flag.IntVar(&o.size, "size", 2048, "approximate message size in bytes")
	flag.IntVar(&o.inboxes, "inboxes", 8, "recipient inboxes")
	flag.IntVar(&o.idle, "idle", 1000, "idle: open streams, and as many waits")
	flag.IntVar(&o.idleSeconds, "idle-seconds", 10, "idle: how long the server's CPU is watched")
	flag.StringVar(&o.only, "only", "", "run one measurement: latency, ingest or idle")
	flag.StringVar(&o.profile, "profile", "", "ingest: write the server's CPU profile of each run (ingest and drain) under this directory, one directory a run")
	extra := flag.String("server-args", "", "extra arguments for inboxd serve, space separated")
	flag.Parse()
	if o.bin == "" {
		fmt.Fprintln(os.Stderr, "eventbench: -bin is required")
		os.Exit(2)
	}
	o.extra = strings.Fields(*extra)
	ctx := context.Background()
	steps := []struct {
		name string
		run  func(context.Context, options) error
	}{{"latency", latency}, {"ingest", ingest}, {"idle", idle}}
	for _, s := range steps {
		if o.only != "" && o.only != s.name {
			continue
		}
		if err := s.run(ctx, o); err != nil {
			fmt.Fprintf(os.Stderr, "eventbench: %s: %v\n", s.name, err)
			os.Exit(1)
		}
	}
}
