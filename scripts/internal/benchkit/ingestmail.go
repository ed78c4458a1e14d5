package benchkit

import (
	"bytes"
	"fmt"
	"time"
)

// The mail an ingest run sends: plain text as a mail client writes it, from one of 300
// customers at SenderDomain. The programs fill the bodies differently, so they build the
// message from these two parts.

// WriteIngestHeader writes the header of ingest message i, through the blank line that
// ends it. id and the result of idOf are Message-ID local parts: every fourth message
// after the first few replies to the one four before it, named by idOf, so the server
// threads some of the mail.
func WriteIngestHeader(b *bytes.Buffer, i int, to, subject string, date time.Time, id string, idOf func(int) string) {
	fmt.Fprintf(b, "From: \"Customer %d\" <sender%d@%s>\r\n", i%300, i%300, SenderDomain)
	fmt.Fprintf(b, "To: <%s>\r\n", to)
	fmt.Fprintf(b, "Subject: %s\r\n", subject)
	fmt.Fprintf(b, "Date: %s\r\n", date.Format(time.RFC1123Z))
	fmt.Fprintf(b, "Message-ID: <%s@%s>\r\n", id, SenderDomain)
	if i > 4 && i%4 == 0 {
		parent := idOf(i - 4)
		fmt.Fprintf(b, "In-Reply-To: <%s@%s>\r\nReferences: <%s@%s>\r\n", parent, SenderDomain, parent, SenderDomain)
	}
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
}

// WriteWrapped appends words from next, lines wrapped after 70 columns, until b holds
// size bytes.
func WriteWrapped(b *bytes.Buffer, size int, next func() string) {
	line := 0
	for b.Len() < size {
		w := next()
		b.WriteString(w)
		line += len(w) + 1
		if line > 70 {
			b.WriteString("\r\n")
			line = 0
		} else {
			b.WriteByte(' ')
		}
	}
}
