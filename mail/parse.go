package mail

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"mime"
	netmail "net/mail"
	"net/textproto"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/jhillyerd/enmime/v2"

	"github.com/inboxd/inboxd/db"
)

// Attachment is one file carried by a message.
type Attachment struct {
	Filename    string // "attachment" when missing
	ContentType string // bare type/subtype, lowercased; "application/octet-stream" when missing
	Content     []byte
}

// Parsed is one RFC 5322 message as the API sees it.
type Parsed struct {
	MessageID   string   // with angle brackets; synthetic (hash of the raw bytes) when missing
	From        string   // first From address, bare and lowercased ("" if none)
	To, Cc      []string // bare lowercased addresses, groups flattened, never nil
	ReplyTo     []string // never nil
	Subject     string   // RFC 2047 decoded
	Text        string   // the text/plain body, else text derived from the HTML body
	HTML        string   // the text/html body if any
	Date        time.Time
	InReplyTo   string   // raw header value, trimmed
	References  []string // <...> tokens of the References header, in order
	Attachments []Attachment
	// TriageHeaders are the fields of db.TriageHeaderNames the message carries, each
	// unfolded, decoded and cut to db.TriageHeaderChars bytes; nil when it has none.
	TriageHeaders map[string]string
}

// errUnreadable is the one way Parse fails: there is nothing to keep.
var errUnreadable = errors.New("mail: message is empty")

const (
	// syntheticIDDomain marks ids inboxd made up for mail that had none;
	// .invalid can never collide with a real sender's domain.
	syntheticIDDomain = "inboxd.invalid"
	// maxForwardDepth bounds recursion into inline message/rfc822 parts.
	maxForwardDepth = 3
	// maxMultiparts guards enmime, which recurses once per nested multipart
	// with a 4 KiB buffer each: no real message comes close, a crafted one
	// could exhaust memory.
	maxMultiparts = 1000
)

// partParser keeps the transfer-encoded bytes of each part so that
// attachments come out byte for byte (enmime would charset-convert text/*
// attachments) and so that body charsets follow our rules in decodeText.
var partParser = enmime.NewParser(
	enmime.RawContent(true),
	enmime.SkipMalformedParts(true),
	enmime.MultipartWOBoundaryAsSinglePart(true),
)

// partReaders are the buffered readers partParser reads through. ReadParts wraps what it
// is given in a new 4 KiB bufio.Reader unless that is one already, and under a stream of
// mail those buffers were ~3% of all the server allocated. enmime keeps no reader once
// ReadParts returns: the parts hold their content as bytes.
var partReaders = sync.Pool{New: func() any { return bufio.NewReader(nil) }}

func readParts(msg []byte) (*enmime.Part, error) {
	br := partReaders.Get().(*bufio.Reader)
	br.Reset(bytes.NewReader(msg))
	defer func() {
		br.Reset(nil)
		partReaders.Put(br)
	}()
	return partParser.ReadParts(br)
}

// Parse reads a message, keeping whatever is readable: one bad part never
// loses the rest. It fails only when the input holds nothing at all.
func Parse(raw []byte) (*Parsed, error) {
	return parse(raw, 0)
}

func parse(raw []byte, depth int) (*Parsed, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errUnreadable
	}
	msg := separateBody(skipMboxLine(raw))
	var root *enmime.Part
	if countMultiparts(msg) <= maxMultiparts {
		root, _ = readParts(msg)
	}
	header, body := textproto.MIMEHeader{}, msg
	if root != nil {
		header, body = root.Header, bodyOf(msg)
	} else if m, err := netmail.ReadMessage(bytes.NewReader(msg)); err == nil {
		header, body = textproto.MIMEHeader(m.Header), bodyOf(msg)
	}

	p := &Parsed{
		MessageID:     messageID(headerValue(header, "Message-Id")),
		To:            parseAddressList(headerValues(header, "To")),
		Cc:            parseAddressList(headerValues(header, "Cc")),
		ReplyTo:       parseAddressList(headerValues(header, "Reply-To")),
		Subject:       decodeHeader(headerValue(header, "Subject")),
		Date:          parseDate(headerValue(header, "Date")),
		InReplyTo:     unfold(headerValue(header, "In-Reply-To")),
		References:    idTokens(strings.Join(headerValues(header, "References"), " ")),
		TriageHeaders: triageHeaders(header),
	}
	if from := parseAddressList(headerValues(header, "From")); len(from) > 0 {
		p.From = from[0]
	}
	if p.MessageID == "" {
		sum := sha256.Sum256(raw)
		p.MessageID = "<" + hex.EncodeToString(sum[:16]) + "@" + syntheticIDDomain + ">"
	}

	w := walker{depth: depth}
	var text, html []string
	if root != nil {
		root = recoverEmptyMultipart(root, body)
	}
	if root != nil && !isEmptyMultipart(root) {
		text, html = w.walk(root, true)
	} else if t := unstructuredText(header, body); t != "" {
		// No MIME structure survived: the body bytes are still worth showing.
		text = []string{t}
	}
	p.Text = strings.Join(text, "\n")
	p.HTML = strings.Join(html, "\n")
	if strings.TrimSpace(p.Text) == "" && p.HTML != "" {
		p.Text = HTMLToText(p.HTML)
	}
	if len(w.forwarded) > 0 {
		p.Text = strings.Join(append([]string{p.Text}, w.forwarded...), "\n\n")
		p.Text = strings.TrimLeft(p.Text, "\n")
	}
	p.Attachments = w.attachments
	return p, nil
}

// skipMboxLine drops the "From sender date" line that .eml files saved
// from an mbox start with; no header parser accepts it.
func skipMboxLine(raw []byte) []byte {
	if !bytes.HasPrefix(raw, []byte("From ")) {
		return raw
	}
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		return raw[i+1:]
	}
	return raw
}

// separateBody puts back the empty line that ends the header block when a sender left it
// out (cron and hand-written scripts do): the first line after the first header that is
// neither a continuation nor holds a colon starts the body. Without it the body would be
// read as broken header lines and lost.
func separateBody(msg []byte) []byte {
	for i := 0; i < len(msg); {
		j := bytes.IndexByte(msg[i:], '\n')
		end := len(msg)
		if j >= 0 {
			end = i + j + 1
		}
		line := bytes.TrimRight(msg[i:end], "\r\n")
		if len(line) == 0 {
			return msg // the separator is there
		}
		if i == 0 && !isFieldLine(line) {
			return msg // not a header block at all
		}
		if line[0] != ' ' && line[0] != '\t' && bytes.IndexByte(line, ':') < 0 {
			eol := "\n"
			if i >= 2 && msg[i-2] == '\r' {
				eol = "\r\n"
			}
			out := make([]byte, 0, len(msg)+len(eol))
			out = append(append(out, msg[:i]...), eol...)
			return append(out, msg[i:]...)
		}
		if j < 0 {
			return msg
		}
		i = end
	}
	return msg
}

// isFieldLine reports whether line starts a header field: a name of printable ASCII
// without spaces, then a colon.
func isFieldLine(line []byte) bool {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return false
	}
	for _, c := range line[:colon] {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// bodyOf returns what follows the header block (nil when there is none).
func bodyOf(msg []byte) []byte {
	if i := headerEnd(msg); i >= 0 {
		return msg[i:]
	}
	return nil
}

// headerEnd returns the offset of the body: after the first empty line.
func headerEnd(raw []byte) int {
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			return -1
		}
		line := bytes.TrimRight(raw[i:i+j], "\r")
		if len(line) == 0 {
			return i + j + 1
		}
		i += j + 1
	}
	return -1
}

// countMultiparts counts "multipart/" in any letter case without copying
// the message.
func countMultiparts(b []byte) int {
	const word = "multipart"
	n := 0
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '/')
		if j < 0 {
			return n
		}
		i += j + 1
		if i-1 >= len(word) && strings.EqualFold(string(b[i-1-len(word):i-1]), word) {
			n++
		}
	}
}

// headerValues looks keys up case-insensitively: enmime and net/textproto
// disagree on the canonical form of names like Message-ID.
func headerValues(h textproto.MIMEHeader, name string) []string {
	var out []string
	for k, v := range h {
		if strings.EqualFold(k, name) {
			out = append(out, v...)
		}
	}
	return out
}

func headerValue(h textproto.MIMEHeader, name string) string {
	if v := headerValues(h, name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// triageHeaders picks out the fields triage reads (db.TriageHeaderNames).
func triageHeaders(h textproto.MIMEHeader) map[string]string {
	var out map[string]string
	for _, name := range db.TriageHeaderNames() {
		v := headerValue(h, name)
		if v == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = db.ClipBytes(unfold(decodeHeader(v)), db.TriageHeaderChars)
	}
	return out
}

// unfold is a raw header value as one line: each run of white space, line breaks included
// (a bare CR survives header parsing), becomes one space. Values that reach the headers of a
// reply must not carry a line break.
func unfold(v string) string {
	return strings.Join(strings.Fields(Clean(v)), " ")
}

// idTokens returns the <...> tokens of a header value, in order.
func idTokens(v string) []string {
	return db.MessageIDTokens(Clean(v))
}

// messageID accepts the bracketed form and, because some senders omit
// them, a bare id@domain; "" tells the caller to make up an id.
func messageID(v string) string {
	v = strings.TrimSpace(Clean(v))
	if t := db.MessageIDTokens(v); len(t) > 0 {
		if db.ValidMessageID(t[0]) {
			return t[0]
		}
		return ""
	}
	if strings.Contains(v, "@") && !strings.ContainsFunc(v, unicode.IsSpace) && db.ValidMessageID("<"+v+">") {
		return "<" + v + ">"
	}
	return ""
}

func parseDate(v string) time.Time {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}
	}
	// Nearly every sender writes this form, and net/mail tries 24 layouts without the day
	// of the week before it, each failure an allocated error.
	if t, err := time.Parse("Mon, 2 Jan 2006 15:04:05 -0700", v); err == nil {
		return t
	}
	if t, err := netmail.ParseDate(v); err == nil {
		return t
	}
	// Trailing comments like "(PST)" and doubled spaces trip ParseDate.
	if i := strings.IndexByte(v, '('); i > 0 {
		v = v[:i]
	}
	if t, err := netmail.ParseDate(strings.Join(strings.Fields(v), " ")); err == nil {
		return t
	}
	return time.Time{}
}

func isEmptyMultipart(p *enmime.Part) bool {
	return p.FirstChild == nil && strings.HasPrefix(strings.ToLower(p.ContentType), "multipart/")
}

// unstructuredText reads a body the MIME parser could not, as one text part.
func unstructuredText(header textproto.MIMEHeader, body []byte) string {
	ctype, params, _ := mime.ParseMediaType(headerValue(header, "Content-Type"))
	if !strings.HasPrefix(ctype, "multipart/") {
		body = decodeTransfer(body, headerValue(header, "Content-Transfer-Encoding"))
	}
	return normalizeNewlines(decodeText(body, params["charset"], ctype == "text/html"))
}

// recoverEmptyMultipart handles a multipart whose declared boundary never
// occurs (or is missing): if the body has delimiter lines of another
// boundary, the parts are re-read with it.
func recoverEmptyMultipart(root *enmime.Part, body []byte) *enmime.Part {
	ctype := strings.ToLower(root.ContentType)
	if !strings.HasPrefix(ctype, "multipart/") || root.FirstChild != nil {
		return root
	}
	b := guessBoundary(body)
	if b == "" {
		return root
	}
	head := "Content-Type: " + mime.FormatMediaType(ctype, map[string]string{"boundary": b}) + "\r\n\r\n"
	again, err := readParts(append([]byte(head), body...))
	if err != nil || again.FirstChild == nil {
		return root
	}
	return again
}

var boundaryLineRE = regexp.MustCompile(`^--([0-9A-Za-z'()+_,./:=?-]{1,70})\s*$`)

func guessBoundary(body []byte) string {
	for line := range bytes.Lines(body) {
		if m := boundaryLineRE.FindSubmatch(bytes.TrimRight(line, "\r\n")); m != nil {
			return strings.TrimSuffix(string(m[1]), "--")
		}
	}
	return ""
}

// walker collects the body and attachments of a part tree in document order.
type walker struct {
	depth       int
	attachments []Attachment
	forwarded   []string // text of inline forwarded messages
}

func (w *walker) walk(p *enmime.Part, isRoot bool) (text, html []string) {
	if p.FirstChild == nil {
		return w.leaf(p, isRoot)
	}
	alternative := strings.EqualFold(p.ContentType, "multipart/alternative")
	var chosenText []string
	for c := p.FirstChild; c != nil; c = c.NextSibling {
		t, h := w.walk(c, false)
		if !alternative {
			text, html = append(text, t...), append(html, h...)
			continue
		}
		// Alternatives say the same thing: keep the first plain version and
		// the last (richest) HTML one.
		if chosenText == nil && len(t) > 0 {
			chosenText = t
		}
		if len(h) > 0 {
			html = h
		}
	}
	if alternative {
		text = chosenText
	}
	return text, html
}

// leaf classifies one part: body text, an inline forwarded message, or an
// attachment. A text part with a filename is a file the sender attached,
// not the body, except when it is the whole message.
func (w *walker) leaf(p *enmime.Part, isRoot bool) (text, html []string) {
	ctype := strings.ToLower(strings.TrimSpace(p.ContentType))
	if ctype == "" || strings.HasPrefix(ctype, "multipart/") {
		// RFC 2045 default; a multipart without parts is best read as text.
		ctype = "text/plain"
	}
	content := decodeTransfer(p.Content, headerValue(p.Header, "Content-Transfer-Encoding"))
	attached := strings.EqualFold(p.Disposition, "attachment")
	named := p.FileName != "" && !isRoot

	if (ctype == "text/plain" || ctype == "text/html") && !attached && !named {
		s := normalizeNewlines(decodeText(content, p.Charset, ctype == "text/html"))
		switch {
		case strings.TrimSpace(s) == "":
			// An empty alternative must not hide the other one.
			return nil, nil
		case ctype == "text/html":
			return nil, []string{s}
		}
		return []string{unflow(s, headerValue(p.Header, "Content-Type"))}, nil
	}
	if (ctype == "message/rfc822" || ctype == "message/global") && !attached && w.depth < maxForwardDepth {
		if inner, err := parse(content, w.depth+1); err == nil {
			w.forwarded = append(w.forwarded, forwardedText(inner))
		}
	}
	if len(content) == 0 && p.FileName == "" && !attached {
		return nil, nil
	}
	w.attachments = append(w.attachments, Attachment{
		Filename:    cleanFilename(p.FileName),
		ContentType: cleanContentType(ctype),
		Content:     content,
	})
	return nil, nil
}

// forwardedText shows an inline forwarded message the way mail clients do.
func forwardedText(m *Parsed) string {
	var b strings.Builder
	b.WriteString("---------- Forwarded message ----------\n")
	if m.From != "" {
		b.WriteString("From: " + m.From + "\n")
	}
	if !m.Date.IsZero() {
		b.WriteString("Date: " + m.Date.Format(time.RFC1123Z) + "\n")
	}
	b.WriteString("Subject: " + m.Subject + "\n")
	if len(m.To) > 0 {
		b.WriteString("To: " + strings.Join(m.To, ", ") + "\n")
	}
	b.WriteString("\n" + m.Text)
	return b.String()
}

// unflow joins the soft line breaks of format=flowed text (RFC 3676), which
// would otherwise show as ragged 72-column lines.
func unflow(s, contentType string) string {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.EqualFold(params["format"], "flowed") {
		return s
	}
	delsp := strings.EqualFold(params["delsp"], "yes")
	lines := strings.Split(s, "\n")
	var b strings.Builder
	for i, l := range lines {
		l = strings.TrimPrefix(l, " ") // space-stuffing
		soft := strings.HasSuffix(l, " ") && l != "-- " && i < len(lines)-1
		if soft && delsp {
			l = l[:len(l)-1]
		}
		b.WriteString(l)
		if !soft && i < len(lines)-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func cleanFilename(name string) string {
	name = Clean(name)
	// Only the last path element: a name like ../../x must not steer
	// clients that save attachments by name.
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if name == "" || name == "." || name == ".." {
		return "attachment"
	}
	return name
}

var mediaTypeRE = regexp.MustCompile(`^[a-z0-9!#$&^_.+-]+/[a-z0-9!#$&^_.+-]+$`)

func cleanContentType(ctype string) string {
	ctype = strings.ToLower(strings.TrimSpace(ctype))
	if len(ctype) > 100 || !mediaTypeRE.MatchString(ctype) {
		return "application/octet-stream"
	}
	return ctype
}

// decodeTransfer undoes the Content-Transfer-Encoding, keeping what it can
// of damaged data; unknown encodings pass through untouched.
func decodeTransfer(b []byte, cte string) []byte {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		return decodeBase64(b)
	case "quoted-printable":
		return decodeQuotedPrintable(b)
	}
	return b
}

// decodeBase64 decodes well-formed data (line breaks included) in one
// pass; anything else goes to the lenient decoder.
func decodeBase64(b []byte) []byte {
	out := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
	if n, err := base64.StdEncoding.Decode(out, b); err == nil {
		return out[:n]
	}
	return decodeBase64Loose(b)
}

// decodeBase64Loose skips characters outside the alphabet and restarts
// after padding, so line noise or concatenated chunks do not lose the rest.
func decodeBase64Loose(b []byte) []byte {
	out := make([]byte, 0, len(b)*3/4)
	chunk := make([]byte, 0, len(b))
	flush := func() {
		if len(chunk)%4 == 1 {
			chunk = chunk[:len(chunk)-1]
		}
		dst := make([]byte, base64.RawStdEncoding.DecodedLen(len(chunk)))
		n, _ := base64.RawStdEncoding.Decode(dst, chunk)
		out = append(out, dst[:n]...)
		chunk = chunk[:0]
	}
	for _, c := range b {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
			chunk = append(chunk, c)
		case c == '=':
			if len(chunk) > 0 {
				flush()
			}
		}
	}
	flush()
	return out
}

// decodeQuotedPrintable is lenient where mime/quotedprintable errors: a
// stray "=" is kept literally instead of ending the part.
func decodeQuotedPrintable(b []byte) []byte {
	out := make([]byte, 0, len(b))
	lines := bytes.Split(b, []byte("\n"))
	for i, line := range lines {
		last := i == len(lines)-1
		line = bytes.TrimRight(line, "\r")
		line = bytes.TrimRight(line, " \t") // transport padding
		soft := bytes.HasSuffix(line, []byte("="))
		if soft {
			line = line[:len(line)-1]
		}
		for j := 0; j < len(line); j++ {
			c := line[j]
			if c == '=' && j+2 < len(line) && isHex(line[j+1]) && isHex(line[j+2]) {
				out = append(out, unhex(line[j+1])<<4|unhex(line[j+2]))
				j += 2
				continue
			}
			out = append(out, c)
		}
		if !soft && !last {
			out = append(out, '\r', '\n')
		}
	}
	return out
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
