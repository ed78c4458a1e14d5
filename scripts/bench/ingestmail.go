package main

import (
	"bytes"
	"fmt"
	"time"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

// ingestMessages returns n messages of about size bytes each for benchkit.Ingest, from 300
// senders, every fourth a reply to an earlier one, with English-like text. tag keeps the
// Message-IDs of two runs apart.
func ingestMessages(c *corpus, n, size int, rcpts []string, tag string) ([][]byte, []string) {
	msgs := make([][]byte, n)
	to := make([]string, n)
	now := time.Now()
	idOf := func(i int) string { return fmt.Sprintf("%s-%d", tag, i) }
	for i := range n {
		to[i] = rcpts[i%len(rcpts)]
		var b bytes.Buffer
		benchkit.WriteIngestHeader(&b, i, to[i], c.Subject(), now, idOf(i), idOf)
		b.WriteString("Hi,\r\n\r\n")
		benchkit.WriteWrapped(&b, size-40, c.Word)
		b.WriteString("\r\n\r\nBest regards,\r\nCustomer\r\n")
		msgs[i] = b.Bytes()
	}
	return msgs, to
}
