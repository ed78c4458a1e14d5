package main

import (
	"fmt"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

// The corpus is deterministic for a seed: mail of a few hundred senders with subjects from
// everyday templates and 1-4 KB bodies of English-like text. Its vocabulary is larger than
// the whole-server bench's: the long tail of rare words is what makes a real inbox's
// index large.
type corpus struct {
	*benchkit.Corpus
	start time.Time // of the two years the mail spans
}

// subjects adds replies and forwards to the everyday templates: prefixes every search
// index sees in real subjects.
var subjects = []string{
	"Invoice %d from %s", "Re: %s", "Fwd: %s", "Meeting about %s", "Your %s order #%d has shipped",
	"Question about %s", "%s", "Re: Re: %s", "Weekly %s report", "Reminder: %s tomorrow",
	"[%s] New comment on issue #%d", "Action required: %s", "%s update", "Lunch on %s?",
}

func newCorpus(seed uint64, nSenders int) *corpus {
	return &corpus{
		Corpus: benchkit.New(benchkit.Config{Seed: seed, Vocabulary: 60000, Senders: nSenders, SenderSkew: 2, Subjects: subjects}),
		start:  time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
	}
}

// message is one generated mail.
type message struct {
	from        benchkit.Person
	to          []string
	subject     string
	body        string
	ts          time.Time
	attachments []string
	category    string
	needsReply  *bool
	urgency     string
}

func (c *corpus) message(i, n int, to string) message {
	from := c.Sender()
	m := message{
		from:    from,
		to:      []string{to},
		subject: c.Subject(),
		// Spread over two years, oldest first, with jitter.
		ts: c.start.Add(time.Duration(float64(i)/float64(n)*2*365*24*float64(time.Hour)) + time.Duration(c.Rng.IntN(3600))*time.Second),
	}
	m.body = c.Body(from, 1024+c.Rng.IntN(3072), "") // 1-4 KB
	if c.Rng.IntN(5) == 0 {
		m.to = append(m.to, c.Senders[c.Rng.IntN(len(c.Senders))].Addr)
	}
	if c.Rng.IntN(10) == 0 {
		m.attachments = []string{fmt.Sprintf("%s-%d.pdf", c.Word(), c.Rng.IntN(1000))}
	}
	if c.Rng.IntN(3) > 0 { // two thirds have a complete triage result
		categories := db.TriageCategories()
		m.category = categories[c.Rng.IntN(len(categories))]
		v := c.Rng.IntN(3)
		if v < 2 {
			b := v == 0
			m.needsReply = &b
		}
		urgencies := db.UrgencyLevels()
		m.urgency = urgencies[c.Rng.IntN(len(urgencies))]
	}
	return m
}
