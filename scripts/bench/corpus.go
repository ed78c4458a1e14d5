package main

import "github.com/inboxd/inboxd/scripts/internal/benchkit"

// corpus is the shared mail generator with the data set's own draws (attachments, triage
// results, protection verdicts: gen.go) as methods; they draw from its random stream, so
// the seed fixes the whole data set.
type corpus struct{ *benchkit.Corpus }

// newCorpus is benchkit's company mail.
func newCorpus(seed uint64) *corpus {
	return &corpus{benchkit.CompanyMail(seed)}
}
