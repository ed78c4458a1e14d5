package main

import "github.com/inboxd/inboxd/scripts/internal/benchkit"

// corpus is the shared mail generator with the data set's own draws (attachments, triage
// results, protection verdicts: gen.go) as methods; they draw from its random stream, so
// the seed fixes the whole data set.
type corpus struct{ *benchkit.Corpus }

// newCorpus: 2,000 correspondents with a strong skew, as one company's inboxes see.
func newCorpus(seed uint64) *corpus {
	return &corpus{benchkit.New(benchkit.Config{Seed: seed, Vocabulary: 40000, Senders: 2000, SenderSkew: 2.5, Subjects: benchkit.Subjects})}
}
