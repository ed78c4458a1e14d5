// Command train fits the built-in triage model on the training messages of the labelled
// corpus and writes it where the binary embeds it from:
//
//	go generate ./mail/triage
//	(= cd mail/triage && go run ./train -corpus ../../fixtures/triage/corpus.jsonl \
//	   -written '../../fixtures/triage/written/*.jsonl' -out model.json)
//
// It reads the generated corpus and the files written by hand (fixtures/triage/README.md),
// and of each only the lines marked "train": the generator's held-out "test" split and the
// hand-written test sets are for scripts/triage-eval.sh. Training is deterministic, so the
// output is the same bit for bit.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/mail/triage"
)

func main() {
	corpus := flag.String("corpus", "fixtures/triage/corpus.jsonl", "generated corpus (JSON lines)")
	written := flag.String("written", "fixtures/triage/written/*.jsonl", "files written by hand to train on (a glob; \"\" for none)")
	out := flag.String("out", "mail/triage/model.json", "model file to write")
	lambdas := flag.String("lambdas", "", "L2 penalties to choose from, comma-separated (default: the chosen ones, triage.Train)")
	flag.Parse()
	var opts triage.TrainOptions
	for _, f := range strings.Split(*lambdas, ",") {
		if f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "train: -lambdas:", err)
			os.Exit(2)
		}
		opts.Lambdas = append(opts.Lambdas, v)
	}
	if err := run(*corpus, *written, *out, opts); err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}

func run(corpus, written, out string, opts triage.TrainOptions) error {
	all, err := triage.LoadTrainingSet(corpus, written, mail.HTMLToText)
	if err != nil {
		return err
	}
	train := triage.TrainSplit(all)
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	logf("training on %d of %d messages (the %d held out are not read)", len(train), len(all), len(all)-len(train))
	opts.Log = logf
	m := triage.Train(train, opts)
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
