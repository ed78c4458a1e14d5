package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// The text of the data set: deterministic for a seed. Words follow Zipf's law over a
// vocabulary of common English and business words and a long tail of made-up rarer words,
// names and numbers; senders have a skew (a few correspondents write most of the mail).

var commonWords = strings.Fields(`the of and to a in is you that it for on was with as have be at this are
not but from or by your we can will an all if about my one would there their what so up out
which me when make like time no just him know take people into year good some could them see
other than then now look only come its over think also back after use two how our work first
well way even new want because any these give day most us thanks please let hi hello regards
best team meeting project update report invoice order payment account customer support issue
question review plan week today tomorrow monday tuesday wednesday thursday friday schedule call
email message attached file document contract price quote delivery shipping status request
need help office budget sales marketing client service product release version feature
bug fix test deploy server database login password security access user data analysis draft
proposal agenda notes summary deadline quarter revenue cost estimate approval feedback launch
lunch dinner coffee travel flight hotel booking confirmation receipt refund subscription
renewal trial upgrade pricing discount offer newsletter event webinar conference speaker
slides presentation recording link calendar invite reminder follow discuss share send receive
check confirm cancel change move complete pending approve reject sign submit upload
download install configure migrate backup restore monitor alert incident outage maintenance
network storage cluster api endpoint token key certificate domain dns cloud region instance
morning afternoon evening weekend holiday vacation birthday family kids school doctor appointment
happy sorry great sure fine again really looking forward hearing soon quick note
january february march april may june july august september october november december`)

var firstNames = strings.Fields(`Alice Bob Carol David Erin Frank Grace Heidi Ivan Judy Karl Laura Mallory Nina
Oscar Peggy Quentin Rupert Sybil Trent Ursula Victor Wendy Xavier Yolanda Zach Maria Jose Wei Li
Fatima Ahmed Olga Sven Ingrid Pierre Chloe Hiro Yuki Priya Raj Amara Kofi Lucia Mateo Elena Tomas`)

var lastNames = strings.Fields(`Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez
Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris
Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores`)

var companies = strings.Fields(`acme globex initech umbrella hooli vehement massive dynamics stark wayne
wonka cyberdyne tyrell soylent oscorp aperture blackmesa gringotts monarch vandelay pendant
bluth dunder sterling prestige northwind contoso fabrikam tailspin wingtip adventure litware
proseware fourthcoffee alpine margie woodgrove treyresearch lucerne humongous coho datum`)

var tlds = []string{"com", "com", "com", "io", "org", "net", "co.uk", "de"}

type person struct{ name, addr, domain string }

type corpus struct {
	rng     *rand.Rand
	vocab   []string
	cdf     []float64
	senders []person
}

func newCorpus(seed uint64) *corpus {
	c := &corpus{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	seen := map[string]bool{}
	for _, w := range commonWords {
		if !seen[w] {
			seen[w] = true
			c.vocab = append(c.vocab, w)
		}
	}
	syl := strings.Fields("ka lo mi ne ra su to ve xi zo bra cre dri flo gra pli stu tro an el in or un ex ter mon dal fin gor")
	for len(c.vocab) < 40000 {
		n := 2 + c.rng.IntN(3)
		var b strings.Builder
		for range n {
			b.WriteString(syl[c.rng.IntN(len(syl))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			c.vocab = append(c.vocab, w)
		}
	}
	c.cdf = make([]float64, len(c.vocab))
	sum := 0.0
	for i := range c.vocab {
		sum += 1 / math.Pow(float64(i+1), 1.07)
		c.cdf[i] = sum
	}
	for i := range c.cdf {
		c.cdf[i] /= sum
	}
	for len(c.senders) < 2000 {
		f, l := firstNames[c.rng.IntN(len(firstNames))], lastNames[c.rng.IntN(len(lastNames))]
		dom := companies[c.rng.IntN(len(companies))] + "." + tlds[c.rng.IntN(len(tlds))]
		addr := strings.ToLower(f + "." + l + "@" + dom)
		if !seen[addr] {
			seen[addr] = true
			c.senders = append(c.senders, person{name: f + " " + l, addr: addr, domain: dom})
		}
	}
	return c
}

func (c *corpus) word() string {
	x := c.rng.Float64()
	lo, hi := 0, len(c.cdf)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if c.cdf[mid] < x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return c.vocab[lo]
}

// midWord is a word of middle frequency (rank 60-3000): what people search for.
func (c *corpus) midWord() string { return c.vocab[60+c.rng.IntN(2940)] }

// sender picks a correspondent with a skew.
func (c *corpus) sender() person {
	return c.senders[int(float64(len(c.senders))*math.Pow(c.rng.Float64(), 2.5))]
}

func (c *corpus) sentence() string {
	n := 5 + c.rng.IntN(14)
	words := make([]string, n)
	for i := range words {
		words[i] = c.word()
	}
	switch c.rng.IntN(12) {
	case 0:
		words[c.rng.IntN(n)] = fmt.Sprintf("#%d", 1000+c.rng.IntN(90000))
	case 1:
		words[c.rng.IntN(n)] = fmt.Sprintf("$%d.%02d", c.rng.IntN(5000), c.rng.IntN(100))
	case 2:
		words[c.rng.IntN(n)] = c.senders[c.rng.IntN(len(c.senders))].addr
	case 3:
		words[c.rng.IntN(n)] = "https://" + companies[c.rng.IntN(len(companies))] + ".com/" + c.word() + "/" + c.word()
	}
	s := strings.Join(words, " ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

var subjectTemplates = []string{
	"Invoice %d from %s", "Meeting about %s", "Your %s order #%d has shipped",
	"Question about %s", "%s", "Weekly %s report", "Reminder: %s tomorrow",
	"[%s] New comment on issue #%d", "Action required: %s", "%s update", "Lunch on %s?",
}

func (c *corpus) subject() string {
	words := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = c.word()
		}
		return strings.Join(w, " ")
	}
	t := subjectTemplates[c.rng.IntN(len(subjectTemplates))]
	if strings.Count(t, "%") == 1 {
		return fmt.Sprintf(t, words(2+c.rng.IntN(5)))
	}
	if strings.HasPrefix(t, "Invoice") {
		return fmt.Sprintf(t, 10000+c.rng.IntN(90000), companies[c.rng.IntN(len(companies))])
	}
	return fmt.Sprintf(t, words(1+c.rng.IntN(3)), 100+c.rng.IntN(9000))
}

// bodySize draws a text body size: log-normal around 1.5 KB, 200 B to 24 KB, as
// person-to-person and notification mail is.
func (c *corpus) bodySize() int {
	v := math.Exp(math.Log(1500) + 0.7*c.rng.NormFloat64())
	return int(min(max(v, 200), 24<<10))
}

// body returns about size bytes of text in paragraphs, greeting and signature included,
// quoting the message replied to when there is one.
func (c *corpus) body(from person, size int, quoted string) string {
	var b strings.Builder
	b.WriteString("Hi,\n\n")
	for b.Len() < size-60 {
		for i := 0; i < 3 && b.Len() < size-60; i++ {
			b.WriteString(c.sentence())
			b.WriteByte(' ')
		}
		b.WriteString("\n\n")
	}
	b.WriteString("Best,\n" + from.name + "\n")
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

// html renders a text body the way mail clients do for their multipart/alternative part.
func html(text string) string {
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
