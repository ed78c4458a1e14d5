package benchkit

import (
	"fmt"
	"math"
	"strings"
)

// Sentence is 5 to 18 words, one in three sentences carrying a ticket number, a price, an
// address or a link: the tokens that make an index's dictionary large.
func (c *Corpus) Sentence() string {
	n := 5 + c.Rng.IntN(14)
	words := make([]string, n)
	for i := range words {
		words[i] = c.Word()
	}
	switch c.Rng.IntN(12) {
	case 0:
		words[c.Rng.IntN(n)] = fmt.Sprintf("#%d", 1000+c.Rng.IntN(90000))
	case 1:
		words[c.Rng.IntN(n)] = fmt.Sprintf("$%d.%02d", c.Rng.IntN(5000), c.Rng.IntN(100))
	case 2:
		words[c.Rng.IntN(n)] = c.Senders[c.Rng.IntN(len(c.Senders))].Addr
	case 3:
		words[c.Rng.IntN(n)] = "https://" + companies[c.Rng.IntN(len(companies))] + ".com/" + c.Word() + "/" + c.Word()
	}
	s := strings.Join(words, " ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// Subjects are everyday subject templates. A template with one placeholder takes words; the
// others take words and a number, except the invoice, which takes a number and a company.
var Subjects = []string{
	"Invoice %d from %s", "Meeting about %s", "Your %s order #%d has shipped",
	"Question about %s", "%s", "Weekly %s report", "Reminder: %s tomorrow",
	"[%s] New comment on issue #%d", "Action required: %s", "%s update", "Lunch on %s?",
}

// Subject fills one of the corpus's templates.
func (c *Corpus) Subject() string {
	words := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = c.Word()
		}
		return strings.Join(w, " ")
	}
	t := c.subjects[c.Rng.IntN(len(c.subjects))]
	if strings.Count(t, "%") == 1 {
		return fmt.Sprintf(t, words(2+c.Rng.IntN(5)))
	}
	if strings.HasPrefix(t, "Invoice") {
		return fmt.Sprintf(t, 10000+c.Rng.IntN(90000), companies[c.Rng.IntN(len(companies))])
	}
	return fmt.Sprintf(t, words(1+c.Rng.IntN(3)), 100+c.Rng.IntN(9000))
}

// BodySize draws a text body size: log-normal around 1.5 KB, 200 B to 24 KB, as
// person-to-person and notification mail is.
func (c *Corpus) BodySize() int {
	v := math.Exp(math.Log(1500) + 0.7*c.Rng.NormFloat64())
	return int(min(max(v, 200), 24<<10))
}

// Body returns about size bytes of text in paragraphs, greeting and signature included,
// quoting the message replied to when there is one.
func (c *Corpus) Body(from Person, size int, quoted string) string {
	var b strings.Builder
	b.WriteString("Hi,\n\n")
	for b.Len() < size-60 {
		for i := 0; i < 3 && b.Len() < size-60; i++ {
			b.WriteString(c.Sentence())
			b.WriteByte(' ')
		}
		b.WriteString("\n\n")
	}
	b.WriteString("Best,\n" + from.Name + "\n")
	if quoted != "" {
		b.WriteString("\n> ")
		q := quoted
		if len(q) > 600 {
			q = q[:600]
		}
		b.WriteString(strings.ReplaceAll(strings.TrimSpace(q), "\n", "\n> "))
		b.WriteString("\n")
	}
	return b.String()
}

// HTML renders a text body the way mail clients do for their multipart/alternative part.
func HTML(text string) string {
	var b strings.Builder
	b.WriteString(`<html><head><meta http-equiv="Content-Type" content="text/html; charset=utf-8"></head><body><div dir="ltr">`)
	for _, p := range strings.Split(text, "\n\n") {
		b.WriteString(`<p style="margin:0 0 12px 0;font-family:Arial,sans-serif;font-size:14px">`)
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(p, "&", "&amp;"), "<", "&lt;"), "\n", "<br>"))
		b.WriteString("</p>")
	}
	b.WriteString("</div></body></html>")
	return b.String()
}
