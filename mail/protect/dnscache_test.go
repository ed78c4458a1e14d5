package protect

import (
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// A burst of mail from one domain looks its records up once: later messages reuse the
// answers for DNSCacheTTL, with the same verdict.
func TestDNSAnswersAreReusedAcrossMessages(t *testing.T) {
	c := qt.New(t)
	w := newWorld(t)
	raw := message("Alice <alice@example.org>", "Numbers", "See you Monday.")
	first := scan(t, w.s, raw, goodIP, "mail.example.org", "alice@example.org")
	asked := w.dns.queries
	c.Assert(asked > 0, qt.IsTrue)
	second := scan(t, w.s, raw, goodIP, "mail.example.org", "alice@example.org")
	c.Assert(w.dns.queries, qt.Equals, asked)
	c.Assert(auth(second), qt.Equals, auth(first))

	// Without the cache every message asks again.
	s := newScanner(t, Config{Resolver: w.dns, DNSCacheTTL: -1})
	scan(t, s, raw, goodIP, "mail.example.org", "alice@example.org")
	n := w.dns.queries
	scan(t, s, raw, goodIP, "mail.example.org", "alice@example.org")
	c.Assert(w.dns.queries, qt.Equals, n+(n-asked))

	// Answers expire.
	s = newScanner(t, Config{Resolver: w.dns, DNSCacheTTL: time.Millisecond})
	scan(t, s, raw, goodIP, "mail.example.org", "alice@example.org")
	n = w.dns.queries
	time.Sleep(5 * time.Millisecond)
	scan(t, s, raw, goodIP, "mail.example.org", "alice@example.org")
	c.Assert(w.dns.queries > n, qt.IsTrue)
}
