package mail

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"mime/quotedprintable"
	netmail "net/mail"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/inboxd/inboxd/db"
)

// Outgoing is a message to compose.
type Outgoing struct {
	From, FromName string   // inbox address and optional display name
	To, Cc, Bcc    []string // Bcc never appears in a header
	ReplyTo        []string
	Subject        string
	Text, HTML     string // either may be empty, not both
	MessageID      string // with brackets, chosen by the caller
	InReplyTo      string
	References     []string
	AutoSubmitted  string // "auto-generated" for send, "auto-replied" for reply
	Date           time.Time
	Attachments    []Attachment
	// Headers are more header fields, written after the others (the test controls'
	// injected mail: List-Id, Auto-Submitted and the like). A name must be a field name
	// that Compose does not write itself.
	Headers map[string]string
}

// NewMessageID returns a fresh Message-ID for mail sent from domain.
func NewMessageID(domain string) string {
	return "<" + uuid.NewString() + "@" + domain + ">"
}

const (
	// foldAt keeps header lines within the RFC 5322 recommended 78 octets.
	foldAt = 76
	// encodedWordBytes is the UTF-8 payload per RFC 2047 word: 42 bytes
	// become 56 base64 chars, 68 with "=?utf-8?b?" and "?=" (limit 75),
	// which keeps "Subject: " and one word within 78 octets.
	encodedWordBytes = 42
	// paramChunk is the longest RFC 2231 continuation written per line.
	paramChunk = 60
)

// Compose renders o as RFC 5322 bytes with CRLF line endings.
func Compose(o Outgoing) ([]byte, error) {
	from, ok := NormalizeAddress(o.From)
	if !ok {
		return nil, fmt.Errorf("compose: invalid from address %q", o.From)
	}
	to, err := addressHeader(o.To)
	if err != nil {
		return nil, err
	}
	cc, err := addressHeader(o.Cc)
	if err != nil {
		return nil, err
	}
	replyTo, err := addressHeader(o.ReplyTo)
	if err != nil {
		return nil, err
	}
	if err := checkExtraHeaders(o.Headers, o.AutoSubmitted != ""); err != nil {
		return nil, err
	}
	if _, err := addressHeader(o.Bcc); err != nil {
		return nil, err
	}
	for _, f := range [][2]string{{"display name", o.FromName}, {"subject", o.Subject}, {"auto-submitted", o.AutoSubmitted}} {
		if strings.ContainsAny(f[1], "\r\n") {
			return nil, fmt.Errorf("compose: %s contains a line break", f[0])
		}
	}
	if !validHeaderID(o.MessageID) {
		return nil, fmt.Errorf("compose: invalid message id %q", o.MessageID)
	}
	if o.InReplyTo != "" && !validHeaderID(o.InReplyTo) {
		return nil, fmt.Errorf("compose: invalid in-reply-to %q", o.InReplyTo)
	}
	for _, r := range o.References {
		if !validHeaderID(r) {
			return nil, fmt.Errorf("compose: invalid reference %q", r)
		}
	}
	if o.AutoSubmitted != "" && !isToken(o.AutoSubmitted) {
		return nil, fmt.Errorf("compose: invalid auto-submitted %q", o.AutoSubmitted)
	}
	body, err := messageBody(o)
	if err != nil {
		return nil, err
	}

	date := o.Date
	if date.IsZero() {
		date = time.Now()
	}
	var b bytes.Buffer
	writeHeader(&b, "Date", date.Format(time.RFC1123Z))
	writeHeader(&b, "From", formatMailbox(o.FromName, from))
	if to != "" {
		writeHeader(&b, "To", to)
	}
	if cc != "" {
		writeHeader(&b, "Cc", cc)
	}
	if replyTo != "" {
		writeHeader(&b, "Reply-To", replyTo)
	}
	writeHeader(&b, "Subject", headerText(o.Subject))
	writeHeader(&b, "Message-ID", o.MessageID)
	if o.InReplyTo != "" {
		writeHeader(&b, "In-Reply-To", o.InReplyTo)
	}
	if len(o.References) > 0 {
		writeHeader(&b, "References", strings.Join(o.References, " "))
	}
	if o.AutoSubmitted != "" {
		writeHeader(&b, "Auto-Submitted", o.AutoSubmitted)
	}
	for _, name := range slices.Sorted(maps.Keys(o.Headers)) {
		writeHeader(&b, name, headerText(o.Headers[name]))
	}
	writeHeader(&b, "MIME-Version", "1.0")
	body.writeTo(&b)
	return b.Bytes(), nil
}

// validHeaderID accepts a single <...> token that is safe in a header.
func validHeaderID(id string) bool {
	return db.ValidMessageID(id) && !strings.ContainsAny(id, " \t")
}

func isToken(s string) bool {
	for _, r := range s {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?=`, r) {
			return false
		}
	}
	return s != ""
}

// addressHeader validates a recipient list and renders it for a header.
func addressHeader(list []string) (string, error) {
	out := make([]string, 0, len(list))
	for i, a := range list {
		n, ok := NormalizeAddress(a)
		if !ok {
			// Stored inbound addresses can have local parts that need
			// quoting ("a,b"@x.test); they are still addresses to reply to.
			if n, ok = bareAddress(a); !ok {
				return "", fmt.Errorf("compose: invalid address %q", a)
			}
			n = strings.Trim((&netmail.Address{Address: n}).String(), "<>")
		}
		if i < len(list)-1 {
			n += ","
		}
		out = append(out, n)
	}
	return strings.Join(out, " "), nil
}

// formatMailbox renders "Name <addr>", quoting or RFC 2047-encoding the
// display name as it needs.
func formatMailbox(name, addr string) string {
	name = strings.TrimSpace(name)
	if name == "" {
		return addr
	}
	if needsEncoding(name) {
		return encodeWords(name) + " <" + addr + ">"
	}
	if strings.ContainsAny(name, `()<>[]:;@\,."`) {
		name = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
	}
	return name + " <" + addr + ">"
}

// headerText renders unstructured text (the subject) so that it survives
// parsing unchanged.
func headerText(s string) string {
	if needsEncoding(s) {
		return encodeWords(s)
	}
	return s
}

// needsEncoding reports whether text must go out as RFC 2047 words: non
// ASCII or control characters, text that would read as encoded words, and
// whitespace that header unfolding would not give back (leading, trailing,
// runs, or a word too long to fold).
func needsEncoding(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f {
			return true
		}
	}
	if strings.Contains(s, "=?") || strings.Contains(s, "  ") || strings.TrimSpace(s) != s {
		return true
	}
	for _, w := range strings.Split(s, " ") {
		if len(w) > foldAt-len("Subject: ") {
			return true
		}
	}
	return false
}

// encodeWords base64-encodes s as UTF-8 encoded words, split between runes
// so each word decodes on its own and the header folds between words.
func encodeWords(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var words []string
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			_, size := utf8.DecodeRuneInString(s[n:])
			if n+size > encodedWordBytes {
				break
			}
			n += size
		}
		words = append(words, "=?utf-8?b?"+base64.StdEncoding.EncodeToString([]byte(s[:n]))+"?=")
		s = s[n:]
	}
	return strings.Join(words, " ")
}

// writeHeader folds value at its single spaces. Folding only inserts CRLF
// before an existing space, so unfolding restores the value exactly.
func writeHeader(b *bytes.Buffer, name, value string) {
	b.WriteString(name + ":")
	lineLen := len(name) + 1
	for i, tok := range strings.Split(value, " ") {
		if i > 0 && lineLen+1+len(tok) > foldAt {
			b.WriteString("\r\n")
			lineLen = 0
		}
		b.WriteString(" " + tok)
		lineLen += 1 + len(tok)
	}
	b.WriteString("\r\n")
}

// mimePart is one entity: its header fields and its encoded body, which
// always ends in CRLF.
type mimePart struct {
	header [][2]string
	body   []byte
	parts  []mimePart // children of a multipart
}

func (p mimePart) writeTo(b *bytes.Buffer) {
	for _, h := range p.header {
		writeHeader(b, h[0], h[1])
	}
	b.WriteString("\r\n")
	if len(p.parts) == 0 {
		b.Write(p.body)
		return
	}
	boundary := p.boundary()
	for _, c := range p.parts {
		b.WriteString("--" + boundary + "\r\n")
		c.writeTo(b)
		b.WriteString("\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
}

func (p mimePart) boundary() string {
	for _, h := range p.header {
		if h[0] == "Content-Type" {
			if i := strings.Index(h[1], `boundary="`); i >= 0 {
				return strings.TrimSuffix(h[1][i+len(`boundary="`):], `"`)
			}
		}
	}
	panic("mail: multipart without boundary")
}

// newBoundary cannot occur in the encoded parts: "=_" never appears in
// quoted-printable (every "=" is an escape) nor in base64.
func newBoundary() string {
	var r [12]byte
	_, _ = rand.Read(r[:])
	return "=_inboxd_" + hex.EncodeToString(r[:])
}

func multipart(subtype string, parts ...mimePart) mimePart {
	return mimePart{
		header: [][2]string{{"Content-Type", "multipart/" + subtype + `; boundary="` + newBoundary() + `"`}},
		parts:  parts,
	}
}

// messageBody builds text/plain, text/html or multipart/alternative, inside
// multipart/mixed when there are attachments. An HTML-only message gets a
// plain alternative derived from it, as mail clients and spam filters
// expect one.
func messageBody(o Outgoing) (mimePart, error) {
	text := o.Text
	if text == "" {
		text = HTMLToText(o.HTML)
	}
	body := textPart("plain", text)
	if o.HTML != "" {
		body = multipart("alternative", body, textPart("html", o.HTML))
	}
	if len(o.Attachments) == 0 {
		return body, nil
	}
	parts := []mimePart{body}
	for _, a := range o.Attachments {
		p, err := attachmentPart(a)
		if err != nil {
			return mimePart{}, err
		}
		parts = append(parts, p)
	}
	return multipart("mixed", parts...), nil
}

// textPart picks the shorter safe encoding: quoted-printable keeps mostly
// ASCII text readable, base64 is smaller for mostly non-ASCII scripts.
func textPart(subtype, s string) mimePart {
	s = normalizeNewlines(Clean(s))
	nonASCII := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			nonASCII++
		}
	}
	header := [][2]string{{"Content-Type", "text/" + subtype + "; charset=utf-8"}}
	if nonASCII*3 > len(s) {
		header = append(header, [2]string{"Content-Transfer-Encoding", "base64"})
		return mimePart{header: header, body: base64Lines([]byte(s))}
	}
	var b bytes.Buffer
	w := quotedprintable.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	if !bytes.HasSuffix(b.Bytes(), []byte("\r\n")) {
		// A soft line break ends the body on CRLF without adding a newline
		// to the text.
		b.WriteString("=\r\n")
	}
	header = append(header, [2]string{"Content-Transfer-Encoding", "quoted-printable"})
	return mimePart{header: header, body: b.Bytes()}
}

func base64Lines(data []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(data)
	var b bytes.Buffer
	b.Grow(len(enc) + len(enc)/foldAt*2 + 2)
	for len(enc) > 0 {
		n := min(foldAt, len(enc))
		b.WriteString(enc[:n])
		b.WriteString("\r\n")
		enc = enc[n:]
	}
	return b.Bytes()
}

func attachmentPart(a Attachment) (mimePart, error) {
	ctype := strings.ToLower(strings.TrimSpace(a.ContentType))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	if !mediaTypeRE.MatchString(ctype) {
		return mimePart{}, fmt.Errorf("compose: invalid attachment content type %q", a.ContentType)
	}
	name := a.Filename
	if name == "" {
		name = "attachment"
	}
	for _, r := range name {
		if r < ' ' || r == 0x7f {
			return mimePart{}, fmt.Errorf("compose: attachment filename %q has a control character", name)
		}
	}
	return mimePart{
		header: [][2]string{
			{"Content-Type", ctype + "; " + formatParam("name", name)},
			{"Content-Disposition", "attachment; " + formatParam("filename", name)},
			{"Content-Transfer-Encoding", "base64"},
		},
		body: base64Lines(a.Content),
	}, nil
}

// formatParam writes a MIME parameter, using RFC 2231 (UTF-8, split into
// continuations) when the value is not short printable ASCII, so no header
// line outgrows the 998-octet limit.
func formatParam(name, value string) string {
	if !needsEncoding(value) && len(value) <= paramChunk {
		return name + `="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(value) + `"`
	}
	var chunks []string
	var cur strings.Builder
	for _, r := range strings.ToValidUTF8(value, "\uFFFD") {
		// Whole characters per continuation: some readers decode each one
		// on its own.
		var enc string
		for _, c := range []byte(string(r)) {
			if isAttrChar(c) {
				enc += string(c)
			} else {
				enc += fmt.Sprintf("%%%02X", c)
			}
		}
		if cur.Len() > 0 && cur.Len()+len(enc) > paramChunk {
			chunks = append(chunks, cur.String())
			cur.Reset()
		}
		cur.WriteString(enc)
	}
	chunks = append(chunks, cur.String())
	out := make([]string, len(chunks))
	for i, c := range chunks {
		if i == 0 {
			c = "utf-8''" + c
		}
		out[i] = fmt.Sprintf("%s*%d*=%s", name, i, c)
	}
	return strings.Join(out, "; ")
}

// isAttrChar is RFC 2231 attribute-char: a token char other than "*'%".
func isAttrChar(c byte) bool {
	return c > ' ' && c < 0x7f && !strings.ContainsRune(`()<>@,;:\"/[]?=*'%`, rune(c))
}

// composedFields are the header fields Compose writes itself, lower case: Headers may not
// name them.
var composedFields = map[string]bool{"date": true, "from": true, "to": true, "cc": true, "bcc": true, "reply-to": true,
	"subject": true, "message-id": true, "in-reply-to": true, "references": true, "mime-version": true,
	"content-type": true, "content-transfer-encoding": true, "content-disposition": true}

// checkExtraHeaders refuses an extra header field Compose writes itself (Auto-Submitted
// too when autoSubmitted), a name that is not a field name (RFC 5322 section 3.6.8) or a
// value with a line break.
func checkExtraHeaders(h map[string]string, autoSubmitted bool) error {
	for name, value := range h {
		if lower := strings.ToLower(name); composedFields[lower] || (autoSubmitted && lower == "auto-submitted") {
			return fmt.Errorf("compose: header %s is written from its own field", name)
		}
		if name == "" || strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r > '~' || r == ':' }) >= 0 {
			return fmt.Errorf("compose: %q is not a header field name", name)
		}
		if strings.ContainsAny(value, "\r\n") {
			return fmt.Errorf("compose: header %s contains a line break", name)
		}
	}
	return nil
}
