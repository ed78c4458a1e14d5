package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

// The data set goes straight into the store through db.Store.DeliverBatch, the call the
// SMTP group commit makes: realistic messages (sizes, threads, HTML parts, attachments,
// labels, triage results and protection verdicts) generated from a seed, so two runs with
// the same flags build the same mail.

const domain = "inboxd.test"

// scale is the shape of the data set.
type scale struct {
	small       int // inboxes of the fleet
	perSmall    int // messages in each
	big         int // messages in the one large inbox
	ingest      int // SMTP messages in the ingest measurement
	sends       int // API sends to a local inbox
	opDuration  time.Duration
	warmup      time.Duration
	starts      int           // start-to-healthy repetitions
	ingestLimit time.Duration // no SMTP message is started after this
	drainLimit  time.Duration // longest wait for the server's queues to drain
}

var fullScale = scale{small: 200, perSmall: 500, big: 100000, ingest: 20000, sends: 1000, opDuration: 3 * time.Second, warmup: 500 * time.Millisecond, starts: 5,
	ingestLimit: 30 * time.Second, drainLimit: 2 * time.Minute}
var quickScale = scale{small: 20, perSmall: 50, big: 2500, ingest: 400, sends: 60, opDuration: 250 * time.Millisecond, warmup: 50 * time.Millisecond, starts: 1,
	ingestLimit: 15 * time.Second, drainLimit: time.Minute}

type inboxData struct {
	addr     string
	msgIDs   []string // RFC 5322 Message-IDs of the stored messages
	threads  []string // thread ids
	subjects []string // a sample of subjects, for searches
}

type dataset struct {
	key      string
	big      *inboxData
	small    []*inboxData
	senders  []string // empty inboxes that send through the API
	target   string   // the local inbox those sends go to
	queries  []string // search queries: mid-frequency words
	messages int
	genTime  time.Duration
	rawBytes int64 // raw RFC 5322 bytes of the data set
}

// attachmentPool holds files many messages share (a logo in a signature, the same terms
// PDF): a server that stores attachments once keeps each of them once.
type attachmentPool struct {
	files []db.NewAttachment
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func newPool(rng *rand.Rand) *attachmentPool {
	p := &attachmentPool{}
	kinds := []struct{ name, ct string }{{"logo.png", "image/png"}, {"terms.pdf", "application/pdf"}, {"signature.jpg", "image/jpeg"}, {"price-list.pdf", "application/pdf"}}
	for i := range 48 {
		k := kinds[i%len(kinds)]
		p.files = append(p.files, db.NewAttachment{Filename: k.name, ContentType: k.ct, Content: randomBytes(rng, 2000+rng.IntN(30000))})
	}
	return p
}

// attachment returns one attachment: three in five from the shared pool, the rest unique
// (compressed formats, so random bytes are what they look like to a compressor).
func (c *corpus) attachment(p *attachmentPool) db.NewAttachment {
	if c.Rng.IntN(5) < 3 {
		return p.files[c.Rng.IntN(len(p.files))]
	}
	size := int(min(max(math.Exp(math.Log(20000)+1.0*c.Rng.NormFloat64()), 500), 400<<10))
	kinds := []struct{ ext, ct string }{{"pdf", "application/pdf"}, {"png", "image/png"}, {"jpg", "image/jpeg"}, {"zip", "application/zip"}, {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}}
	k := kinds[c.Rng.IntN(len(kinds))]
	return db.NewAttachment{Filename: fmt.Sprintf("%s-%d.%s", c.Word(), c.Rng.IntN(10000), k.ext), ContentType: k.ct, Content: randomBytes(c.Rng, size)}
}

func (c *corpus) probs(keys []string, top string) (map[string]float64, float64) {
	conf := math.Round((0.55+0.44*c.Rng.Float64())*1000) / 1000
	weights := make([]float64, len(keys))
	sum := 0.0
	for i := range keys {
		weights[i] = c.Rng.Float64()
		sum += weights[i]
	}
	out := map[string]float64{}
	for i, k := range keys {
		if k == top {
			out[k] = conf
			continue
		}
		out[k] = math.Round((1-conf)*weights[i]/sum*1000) / 1000
	}
	return out, conf
}

// triage returns a complete result as the built-in classifier writes it.
func (c *corpus) triage(at time.Time) *db.Triage {
	categories, urgencies := db.TriageCategories(), db.UrgencyLevels()
	cat := categories[c.Rng.IntN(len(categories))]
	cp, cconf := c.probs(categories, cat)
	urg := urgencies[c.Rng.IntN(len(urgencies))]
	up, uconf := c.probs(urgencies, urg)
	var reply *bool
	if v := c.Rng.IntN(3); v < 2 {
		b := v == 0
		reply = &b
	}
	dur := int64(1 + c.Rng.IntN(4))
	f := false
	return &db.Triage{
		Status: db.TriageComplete, Version: 1, Model: "inboxd-lr-1", AnalyzedAt: db.Time{Time: at.Add(250 * time.Millisecond)}.String(),
		DurationMs: &dur, BodyTruncated: &f,
		Category:   &db.TriageCategory{Value: cat, Confidence: cconf, Probabilities: cp},
		NeedsReply: &db.TriageNeedsReply{Value: reply, Probability: math.Round(c.Rng.Float64()*1000) / 1000},
		Urgency:    &db.TriageUrgency{Value: &urg, Score: math.Round(c.Rng.Float64()*3000) / 1000, Confidence: uconf, Probabilities: up},
	}
}

// protection returns the verdict of an inbound scan; quarantined mail fails on spam.
func (c *corpus) protection(at time.Time, from benchkit.Person, quarantined bool) (*db.Protection, *db.ProtectionDetail) {
	p := &db.Protection{Status: db.ProtectionClean, ScannedAt: db.Time{Time: at}.String(),
		Authentication: db.Authentication{SPF: "pass", DKIM: "pass", DMARC: "pass", SigningDomains: []string{from.Domain}},
		Spam:           db.Spam{Score: math.Round(c.Rng.Float64()*20) / 10, Threshold: 6},
		Antivirus:      db.Antivirus{Status: "clean", Signatures: []string{}}, Reasons: []string{}}
	d := &db.ProtectionDetail{
		SPF:        db.AuthDetail{Result: "pass", Domain: from.Domain},
		DKIM:       []db.DKIMDetail{{Domain: from.Domain, Result: "pass"}},
		DKIMResult: "pass",
		DMARC:      db.AuthDetail{Result: "pass", Domain: from.Domain, Policy: "none", Note: "SPF passed for an aligned domain (" + from.Domain + ")"},
		SpamEngine: "builtin", SpamRules: []db.SpamRule{}, AVEngine: "builtin",
	}
	switch r := c.Rng.IntN(10); {
	case r == 0:
		p.Authentication.DKIM, p.Authentication.SigningDomains = "none", []string{}
		d.DKIM, d.DKIMResult = nil, "none"
	case r == 1:
		p.Authentication.DMARC = "none"
		d.DMARC = db.AuthDetail{Result: "none", Domain: from.Domain, Note: "the From domain publishes no DMARC policy"}
	}
	if quarantined {
		p.Status = db.ProtectionQuarantined
		p.Spam.Score = 7.5
		p.Reasons = []string{"spam"}
		d.SpamRules = []db.SpamRule{{Name: "SPAM_PHRASE", Score: 2.5, Description: "subject or body uses a phrase common in spam"},
			{Name: "SPAM_PHRASES_MANY", Score: 2.5, Description: "three or more different spam phrases"},
			{Name: "MONEY_AMOUNT", Score: 1.5, Description: "body names a large sum of money"}, {Name: "SUBJECT_EXCLAIM", Score: 1.0, Description: "subject has three or more exclamation marks"}}
	}
	return p, d
}

// thread is a conversation in progress while an inbox is generated.
type thread struct {
	subject string
	peer    benchkit.Person
	refs    []string // Message-IDs, oldest first
	last    string   // text of the latest message, quoted by a reply
}

func (c *corpus) messageID(from benchkit.Person, n int) string {
	return fmt.Sprintf("<%016x.%d@%s>", c.Rng.Uint64(), n, from.Domain)
}

// rawMIME renders the message as it arrived (or was sent): trace fields, a mail client's
// headers, and the body as text/plain, multipart/alternative, or multipart/mixed with the
// attachments base64-encoded.
func (c *corpus) rawMIME(m *db.NewMessage, fromName string) []byte {
	var b bytes.Buffer
	if m.Direction == db.Received {
		fmt.Fprintf(&b, "Return-Path: <%s>\r\n", m.From)
		fmt.Fprintf(&b, "Received: from mail-%d.%s (mail-%d.%s [203.0.113.%d])\r\n\tby mx.inboxd.test with ESMTPS id %016x\r\n\tfor <%s>; %s\r\n",
			c.Rng.IntN(90), domainOf(m.From), c.Rng.IntN(90), domainOf(m.From), 1+c.Rng.IntN(250), c.Rng.Uint64(), m.To[0], m.Timestamp.Format(time.RFC1123Z))
		fmt.Fprintf(&b, "DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=%s; s=s1;\r\n\th=from:to:subject:date:message-id; bh=%s;\r\n\tb=%s\r\n",
			domainOf(m.From), base64.StdEncoding.EncodeToString(randomBytes(c.Rng, 32)), base64.StdEncoding.EncodeToString(randomBytes(c.Rng, 256)))
	}
	fmt.Fprintf(&b, "From: %q <%s>\r\nTo: %s\r\n", fromName, m.From, strings.Join(m.To, ", "))
	if len(m.Cc) > 0 {
		fmt.Fprintf(&b, "Cc: %s\r\n", strings.Join(m.Cc, ", "))
	}
	fmt.Fprintf(&b, "Subject: %s\r\nDate: %s\r\nMessage-ID: %s\r\n", m.Subject, m.Timestamp.Format(time.RFC1123Z), m.MessageID)
	if m.InReplyTo != "" {
		fmt.Fprintf(&b, "In-Reply-To: %s\r\nReferences: %s\r\n", m.InReplyTo, strings.Join(m.References, "\r\n "))
	}
	b.WriteString("MIME-Version: 1.0\r\n")
	text := strings.ReplaceAll(m.Text, "\n", "\r\n")
	boundary := fmt.Sprintf("b%016x", c.Rng.Uint64())
	alt := func(bd string) {
		fmt.Fprintf(&b, "Content-Type: multipart/alternative; boundary=%q\r\n\r\n", bd)
		fmt.Fprintf(&b, "--%s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n%s\r\n", bd, text)
		fmt.Fprintf(&b, "--%s\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n%s\r\n--%s--\r\n", bd, m.HTML, bd)
	}
	switch {
	case len(m.Attachments) > 0:
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=%q\r\n\r\n--%s\r\n", boundary, boundary)
		if m.HTML != "" {
			alt(boundary + "a")
		} else {
			fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n%s\r\n", text)
		}
		for _, a := range m.Attachments {
			fmt.Fprintf(&b, "--%s\r\nContent-Type: %s; name=%q\r\nContent-Disposition: attachment; filename=%q\r\nContent-Transfer-Encoding: base64\r\n\r\n", boundary, a.ContentType, a.Filename, a.Filename)
			enc := base64.StdEncoding.EncodeToString(a.Content)
			for len(enc) > 76 {
				b.WriteString(enc[:76])
				b.WriteString("\r\n")
				enc = enc[76:]
			}
			b.WriteString(enc + "\r\n")
		}
		fmt.Fprintf(&b, "--%s--\r\n", boundary)
	case m.HTML != "":
		alt(boundary)
	default:
		fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n%s", text)
	}
	return b.Bytes()
}

func domainOf(addr string) string { return addr[strings.LastIndexByte(addr, '@')+1:] }

// inboxMessages generates the n messages of one inbox, oldest first, spread over span
// before end: conversations of one to a dozen messages, a third of the replies written
// by the inbox (sent mail with its delivery record).
func (c *corpus) inboxMessages(inboxRow int64, addr string, n int, end time.Time, span time.Duration, pool *attachmentPool, emit func(db.NewMessage)) {
	var open []*thread
	owner := benchkit.Person{Name: "Inbox " + strings.Split(addr, "@")[0], Addr: addr, Domain: domain}
	for i := range n {
		ts := end.Add(-span + time.Duration(float64(span)*float64(i)/float64(n)) + time.Duration(c.Rng.IntN(60000))*time.Millisecond).UTC()
		var t *thread
		if len(open) > 0 && c.Rng.IntN(100) < 45 {
			t = open[len(open)-1-c.Rng.IntN(min(len(open), 12))]
			if len(t.refs) == 0 { // its first message was quarantined: nothing to reply to
				t = nil
			}
		}
		m := db.NewMessage{InboxID: inboxRow, Timestamp: ts}
		var from benchkit.Person
		if t == nil {
			t = &thread{subject: c.Subject(), peer: c.Sender()}
			open = append(open, t)
			if len(open) > 64 {
				open = open[1:]
			}
			m.Subject = t.subject
		} else {
			m.Subject = "Re: " + t.subject
			m.InReplyTo = t.refs[len(t.refs)-1]
			m.References = append([]string(nil), t.refs[max(0, len(t.refs)-10):]...)
			m.ThreadCandidates = db.ThreadCandidates(m.References, m.InReplyTo)
		}
		sent := len(t.refs) > 0 && c.Rng.IntN(3) == 0
		if sent {
			from = owner
			m.Direction, m.From, m.To = db.Sent, addr, []string{t.peer.Addr}
		} else {
			from = t.peer
			m.Direction, m.From, m.To = db.Received, t.peer.Addr, []string{addr}
		}
		m.Cc, m.Bcc, m.ReplyTo = []string{}, []string{}, []string{}
		if c.Rng.IntN(6) == 0 {
			m.Cc = []string{c.Senders[c.Rng.IntN(len(c.Senders))].Addr}
		}
		m.MessageID = c.messageID(from, i)
		m.Text = c.Body(from, c.BodySize(), t.last)
		if c.Rng.IntN(10) < 3 {
			m.HTML = benchkit.HTML(m.Text)
		}
		m.Preview = mail.Preview(m.Text)
		if c.Rng.IntN(100) < 8 {
			m.Attachments = []db.NewAttachment{c.attachment(pool)}
		}
		quarantined := !sent && c.Rng.IntN(100) == 0
		var extra []string
		if !sent {
			switch r := c.Rng.IntN(100); {
			case r < 10:
				extra = append(extra, "important")
			case r < 13:
				extra = append(extra, "follow-up")
			case r < 15:
				extra = append(extra, db.LabelTrash)
			}
		}
		m.Labels = db.InitialLabels(m.Direction, quarantined, extra)
		if !sent && i < n-n/20 && !quarantined {
			// Read, all but the newest few.
			m.Labels = removeLabel(m.Labels, db.LabelUnread)
		}
		if sent {
			at := db.Time{Time: ts}.String()
			ms := int64(200 + c.Rng.IntN(900))
			m.Delivery = &db.Delivery{Version: 2, SentAt: at, UpdatedAt: at, Recipients: []db.RecipientDelivery{{
				Recipient: t.peer.Addr, Status: db.RecipientDelivered, UpdatedAt: at, Delivered: true, EventID: fmt.Sprintf("%016x", c.Rng.Uint64()),
				Provider: "relay", SMTPStatusCode: "250", SMTPEnhancedStatusCode: "2.0.0", DeliveryTimeMs: &ms, DeliveryEventAt: at}}}
		} else {
			m.Protection, m.ProtectionDetail = c.protection(ts, from, quarantined)
			switch r := c.Rng.IntN(30); {
			case r < 20:
				m.Triage = c.triage(ts)
			case r < 22:
				m.Triage = &db.Triage{Status: db.TriagePending}
			case r < 23:
				m.Triage = &db.Triage{Status: db.TriageFailed, Code: "provider_error", FailedAt: db.Time{Time: ts}.String()}
			}
		}
		m.Raw = c.rawMIME(&m, from.Name)
		if !quarantined {
			t.refs = append(t.refs, m.MessageID)
			t.last = m.Text
		}
		emit(m)
	}
}

func removeLabel(ls []string, l string) []string {
	out := ls[:0]
	for _, v := range ls {
		if v != l {
			out = append(out, v)
		}
	}
	return out
}

// generate builds the data set in the database at path.
func generate(ctx context.Context, path string, sc scale, seed uint64, logf func(string, ...any)) (*dataset, error) {
	start := time.Now()
	store, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if err := db.EnsureAccount(ctx, store, db.Account{ID: "bench", Plan: db.PlanExempt}, nil); err != nil {
		return nil, err
	}
	ds := &dataset{key: db.GenerateAccountToken()}
	exp := time.Now().AddDate(0, 0, 30)
	if err := db.CreateKey(ctx, store, db.NewKey{AccountID: "bench", Token: ds.key, Scopes: db.AllScopes(), ExpiresAt: &exp}); err != nil {
		return nil, err
	}
	newInbox := func(addr string) (int64, error) {
		in, err := db.CreateInbox(ctx, store, db.NewInbox{AccountID: "bench", Address: addr, DefaultDomain: domain, Seeding: true})
		if err != nil {
			return 0, err
		}
		return in.ID, nil
	}
	type job struct {
		inbox *inboxData
		row   int64
		n     int
		span  time.Duration
	}
	var jobs []job
	ds.big = &inboxData{addr: "big@" + domain}
	row, err := newInbox(ds.big.addr)
	if err != nil {
		return nil, err
	}
	jobs = append(jobs, job{ds.big, row, sc.big, 2 * 365 * 24 * time.Hour})
	for i := range sc.small {
		in := &inboxData{addr: fmt.Sprintf("agent%03d@%s", i, domain)}
		if row, err = newInbox(in.addr); err != nil {
			return nil, err
		}
		ds.small = append(ds.small, in)
		jobs = append(jobs, job{in, row, sc.perSmall, 365 * 24 * time.Hour})
	}
	for i := range (sc.sends + 199) / 200 {
		addr := fmt.Sprintf("sender%d@%s", i, domain)
		if _, err := newInbox(addr); err != nil {
			return nil, err
		}
		ds.senders = append(ds.senders, addr)
	}
	ds.target = "target@" + domain
	if _, err := newInbox(ds.target); err != nil {
		return nil, err
	}

	// One goroutine generates, the caller stores: batches of a few hundred messages per
	// transaction, as the group commit makes under load.
	c := newCorpus(seed)
	pool := newPool(c.Rng)
	end := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	type batch struct {
		msgs   []db.NewMessage
		owners []*inboxData
	}
	batches := make(chan batch, 4)
	go func() {
		defer close(batches)
		var b batch
		for _, j := range jobs {
			c.inboxMessages(j.row, j.inbox.addr, j.n, end, j.span, pool, func(m db.NewMessage) {
				b.msgs = append(b.msgs, m)
				b.owners = append(b.owners, j.inbox)
				if len(b.msgs) == 500 {
					select {
					case batches <- b:
					case <-ctx.Done():
					}
					b = batch{}
				}
			})
			for range 20 {
				j.inbox.subjects = append(j.inbox.subjects, c.MidWord())
			}
		}
		if len(b.msgs) > 0 {
			batches <- b
		}
	}()
	last := time.Now()
	for b := range batches {
		groups := make([][]db.NewMessage, len(b.msgs))
		for i := range b.msgs {
			groups[i] = b.msgs[i : i+1]
			ds.rawBytes += int64(len(b.msgs[i].Raw))
		}
		stored, errs, err := db.DeliverBatch(ctx, store, groups)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for i, st := range stored {
			if errs[i] != nil {
				return nil, errs[i]
			}
			in := b.owners[i]
			in.msgIDs = append(in.msgIDs, st[0].MessageID)
			if !seen[st[0].ThreadID] {
				seen[st[0].ThreadID] = true
				in.threads = append(in.threads, st[0].ThreadID)
			}
		}
		ds.messages += len(b.msgs)
		if time.Since(last) > 10*time.Second {
			logf("  %d messages stored (%.0f/s)", ds.messages, float64(ds.messages)/time.Since(start).Seconds())
			last = time.Now()
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, in := range append([]*inboxData{ds.big}, ds.small...) {
		in.threads = dedupe(in.threads)
		ds.queries = append(ds.queries, in.subjects...)
	}
	ds.genTime = time.Since(start)
	return ds, nil
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
