// Command train fits the built-in triage model on the training split of the labelled
// corpus and writes it where the binary embeds it from:
//
//	go generate ./mail/triage
//	(= cd mail/triage && go run ./train -corpus ../../fixtures/triage/corpus.jsonl -out model.json)
//
// Only messages marked "train" are read; the held-out "test" split is for
// scripts/triage-eval.sh. Training is deterministic, so the output is the same bit for bit.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/inboxd/inboxd/mail/triage"
)

func main() {
	corpus := flag.String("corpus", "fixtures/triage/corpus.jsonl", "labelled corpus (JSON lines)")
	out := flag.String("out", "mail/triage/model.json", "model file to write")
	flag.Parse()
	if err := run(*corpus, *out); err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}

func run(corpus, out string) error {
	all, err := triage.LoadCorpus(corpus)
	if err != nil {
		return err
	}
	var train []triage.Example
	for _, e := range all {
		if e.Split == "train" {
			train = append(train, e)
		}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	logf("training on %d of %d messages (the %d held out are not read)", len(train), len(all), len(all)-len(train))
	m := triage.Train(train, triage.TrainOptions{Log: logf})
	b, err := m.Encode()
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	logf("wrote %s (%d bytes)", out, len(b))
	return nil
}
