package mail

import (
	"bytes"
	"io"
	"mime"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cention-sany/utf7"
	"github.com/gogs/chardet"
	"golang.org/x/net/html"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
	"golang.org/x/text/encoding/unicode/utf32"
	"golang.org/x/text/transform"
)

// previewRunes is the length of a message preview in the API.
const previewRunes = 200

// Clean makes s safe to store and to serve as JSON: NUL is removed (SQLite
// and many clients truncate at it) and invalid UTF-8 becomes U+FFFD.
func Clean(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}

// Preview is the short text shown in message and thread lists.
// It is the text's words joined by single spaces, cut to previewRunes runes, never ending
// in a space; it reads only as much of the text as it needs.
func Preview(text string) string {
	var b strings.Builder
	n, space := 0, false
	for _, r := range Clean(text) {
		if unicode.IsSpace(r) {
			space = n > 0
			continue
		}
		if space {
			if n+1 >= previewRunes {
				break // the space would end the preview
			}
			b.WriteByte(' ')
			n, space = n+1, false
		}
		if n == previewRunes {
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// normalizeNewlines gives API clients "\n" line endings whatever the wire
// used, so text read back equals the text that was sent.
func normalizeNewlines(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// charsetAliases covers labels seen in real mail that neither the WHATWG
// nor the IANA index knows.
var charsetAliases = map[string]string{
	"cp932":         "shift_jis",
	"cp936":         "gbk",
	"ms936":         "gbk",
	"cp949":         "euc-kr",
	"iso-2022-jp-2": "iso-2022-jp", // the common subset decodes
}

// lookupCharset maps a MIME charset label to a decoder. WHATWG labels come
// first because browsers (and so senders) treat iso-8859-1 and us-ascii as
// windows-1252, whose extra characters (curly quotes) are common in mail.
func lookupCharset(label string) (encoding.Encoding, bool) {
	label = strings.ToLower(strings.Trim(strings.TrimSpace(label), `"'`))
	if a, ok := charsetAliases[label]; ok {
		label = a
	}
	switch label {
	case "":
		return nil, false
	case "utf-8", "utf8":
		return encoding.Nop, true
	case "utf-7", "unicode-1-1-utf-7", "csunicode11utf7":
		return utf7.UTF7, true
	case "utf-32", "utf-32le", "utf-32be":
		order := utf32.LittleEndian
		if label == "utf-32be" {
			order = utf32.BigEndian
		}
		return utf32.UTF32(order, utf32.UseBOM), true
	}
	// WHATWG maps a few labels to "replacement", which turns a whole text
	// into one U+FFFD; a best guess reads better than that.
	if e, err := htmlindex.Get(label); err == nil && e != nil && e != encoding.Replacement {
		return e, true
	}
	for _, index := range []*ianaindex.Index{ianaindex.MIME, ianaindex.IANA} {
		if e, err := index.Encoding(label); err == nil && e != nil && e != encoding.Replacement {
			return e, true
		}
	}
	return nil, false
}

// asciiCompatibleStateless reports whether ASCII bytes mean ASCII in the
// charset; only then may valid UTF-8 content be trusted over the label.
func asciiCompatibleStateless(label string) bool {
	l := strings.ToLower(strings.Trim(strings.TrimSpace(label), `"'`))
	return !strings.HasPrefix(l, "utf-16") && !strings.HasPrefix(l, "utf-32") &&
		!strings.HasPrefix(l, "utf-7") && !strings.Contains(l, "2022") &&
		!strings.HasPrefix(l, "hz") && !strings.Contains(l, "utf7")
}

// decodeText turns the bytes of a text part into clean UTF-8. Mail often
// lies about its charset: UTF-8 labelled us-ascii or latin1 is common,
// while latin1 text that happens to be valid UTF-8 is vanishingly rare, so
// valid UTF-8 wins over an ASCII-compatible label.
func decodeText(b []byte, label string, isHTML bool) string {
	if utf8.Valid(b) && (label == "" || asciiCompatibleStateless(label)) {
		return Clean(string(b))
	}
	enc, ok := lookupCharset(label)
	if ok && enc == encoding.Nop && !hasMultibyteUTF8(b) {
		// Labelled UTF-8 without a single UTF-8 sequence: 8-bit text sent
		// with the wrong label, worth reading as such.
		ok = false
	}
	if !ok && isHTML {
		enc, ok = lookupCharset(metaCharset(b))
	}
	if !ok {
		enc = detectCharset(b)
	}
	s, err := decodeWith(enc, b)
	if err != nil {
		return Clean(string(b))
	}
	return Clean(s)
}

func hasMultibyteUTF8(b []byte) bool {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if size > 1 && r != utf8.RuneError {
			return true
		}
		b = b[size:]
	}
	return false
}

func decodeWith(enc encoding.Encoding, b []byte) (string, error) {
	if enc == encoding.Nop {
		return string(b), nil
	}
	out, _, err := transform.Bytes(enc.NewDecoder(), b)
	return string(out), err
}

// minDetectConfidence is the chardet confidence (0-100) enmime also uses
// before believing a guess over the windows-1252 fallback.
const minDetectConfidence = 85

// detectCharset guesses for undeclared 8-bit text. windows-1252 is the
// fallback because it maps every byte and is what unlabelled Western mail
// nearly always is.
func detectCharset(b []byte) encoding.Encoding {
	fallback, _ := lookupCharset("windows-1252")
	r, err := chardet.NewTextDetector().DetectBest(b)
	if err != nil || r == nil || r.Confidence < minDetectConfidence {
		return fallback
	}
	if e, ok := lookupCharset(r.Charset); ok {
		return e
	}
	return fallback
}

var metaCharsetRE = regexp.MustCompile(`(?i)<meta[^>]+charset\s*=\s*["']?\s*([a-z0-9_.:-]+)`)

func metaCharset(b []byte) string {
	head := b
	if len(head) > 4096 {
		head = head[:4096]
	}
	if m := metaCharsetRE.FindSubmatch(head); m != nil {
		return string(m[1])
	}
	return ""
}

// headerDecoder decodes RFC 2047 words in any charset lookupCharset knows.
var headerDecoder = &mime.WordDecoder{CharsetReader: func(label string, r io.Reader) (io.Reader, error) {
	enc, ok := lookupCharset(label)
	if !ok {
		// Keep the bytes rather than failing the whole header.
		return r, nil
	}
	return transform.NewReader(r, enc.NewDecoder()), nil
}}

// decodeHeader returns a header value as clean UTF-8 on one line: RFC 2047
// words are decoded and raw 8-bit bytes (not allowed, but sent) are read as
// UTF-8 when valid, else as windows-1252. Control characters an encoded word
// smuggled in become spaces, so a reply can reuse the subject.
func decodeHeader(v string) string {
	v = strings.TrimSpace(v)
	if !utf8.ValidString(v) {
		v = decodeText([]byte(v), "", false)
	}
	if strings.Contains(v, "=?") {
		if d, err := headerDecoder.DecodeHeader(v); err == nil {
			v = d
		} else {
			v = decodeWordsLoosely(v)
		}
	}
	return strings.Map(func(r rune) rune {
		if r != '\t' && unicode.IsControl(r) {
			return ' '
		}
		return r
	}, Clean(v))
}

// encodedWordRE matches RFC 2047 words even when senders break the rules
// (spaces inside, no separating whitespace), which DecodeHeader rejects.
var encodedWordRE = regexp.MustCompile(`=\?[^?\s]+\?[bBqQ]\?[^?]*\?=`)

func decodeWordsLoosely(v string) string {
	return encodedWordRE.ReplaceAllStringFunc(v, func(w string) string {
		d, err := headerDecoder.Decode(w)
		if err != nil {
			return w
		}
		return d
	})
}

// blockTags start a new line in text derived from HTML.
var blockTags = map[string]bool{
	"address": true, "article": true, "aside": true, "blockquote": true, "br": true,
	"center": true, "dd": true, "div": true, "dl": true, "dt": true, "fieldset": true,
	"figcaption": true, "figure": true, "footer": true, "form": true, "h1": true, "h2": true,
	"h3": true, "h4": true, "h5": true, "h6": true, "header": true, "hr": true, "li": true,
	"main": true, "nav": true, "ol": true, "p": true, "pre": true, "section": true,
	"table": true, "tbody": true, "thead": true, "tfoot": true, "tr": true, "ul": true,
}

// skippedTags hold no readable text. Images are skipped on purpose: their
// alt text is mostly tracking-pixel noise in a text preview.
var skippedTags = map[string]bool{
	"head": true, "script": true, "style": true, "title": true, "noscript": true,
	"template": true, "img": true, "svg": true, "object": true, "iframe": true,
	"video": true, "audio": true, "canvas": true, "map": true, "picture": true,
}

// textBuffer collects words and line breaks, collapsing whitespace the way
// a browser would.
type textBuffer struct {
	b         bytes.Buffer
	pendingSp bool
	newlines  int // trailing newlines already written, capped at 2
}

func (t *textBuffer) word(s string) {
	if s == "" {
		return
	}
	if t.pendingSp && t.b.Len() > 0 && t.newlines == 0 {
		t.b.WriteByte(' ')
	}
	t.pendingSp = false
	t.b.WriteString(s)
	t.newlines = 0
}

func (t *textBuffer) text(s string) {
	s = strings.ReplaceAll(s, "\u00a0", " ")
	if s != "" && unicode.IsSpace(rune(s[0])) {
		t.pendingSp = true
	}
	for i, w := range strings.Fields(s) {
		if i > 0 {
			t.pendingSp = true
		}
		t.word(w)
	}
	if s != "" && unicode.IsSpace(rune(s[len(s)-1])) {
		t.pendingSp = true
	}
}

// pre writes preformatted text as is.
func (t *textBuffer) pre(s string) {
	if s == "" {
		return
	}
	if t.pendingSp && t.newlines == 0 && t.b.Len() > 0 {
		t.b.WriteByte(' ')
	}
	t.pendingSp = false
	s = strings.ReplaceAll(normalizeNewlines(s), "\u00a0", " ")
	t.b.WriteString(s)
	t.newlines = len(s) - len(strings.TrimRight(s, "\n"))
}

// lineBreak ends the current line; paragraph adds a blank line.
func (t *textBuffer) lineBreak(paragraph bool) {
	want := 1
	if paragraph {
		want = 2
	}
	t.pendingSp = false
	if t.b.Len() == 0 {
		return
	}
	for t.newlines < want {
		t.b.WriteByte('\n')
		t.newlines++
	}
}

func (t *textBuffer) String() string {
	lines := strings.Split(t.b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRightFunc(l, unicode.IsSpace)
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// br forces a line break even on an empty line, so <br><br> leaves a gap.
func (t *textBuffer) br() {
	t.pendingSp = false
	if t.b.Len() == 0 || t.newlines >= 2 {
		return
	}
	t.b.WriteByte('\n')
	t.newlines++
}

// paragraphTags are set off by a blank line rather than a single newline.
var paragraphTags = map[string]bool{
	"p": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"blockquote": true, "pre": true, "ul": true, "ol": true, "dl": true, "table": true, "hr": true,
}

// HTMLToText renders HTML as readable plain text for the API's text field,
// previews and search: no markup, scripts, styles or images; links keep
// their target because readers of verification mail need it.
func HTMLToText(s string) string {
	doc, err := html.Parse(strings.NewReader(Clean(s)))
	if err != nil {
		return ""
	}
	var t textBuffer
	renderHTML(&t, doc, false)
	return Clean(t.String())
}

func renderHTML(t *textBuffer, n *html.Node, inPre bool) {
	switch n.Type {
	case html.TextNode:
		if inPre {
			t.pre(n.Data)
		} else {
			t.text(n.Data)
		}
		return
	case html.CommentNode, html.DoctypeNode:
		return
	case html.ElementNode:
		tag := strings.ToLower(n.Data)
		if skippedTags[tag] {
			return
		}
		switch {
		case tag == "br":
			t.br()
			return
		case tag == "a":
			renderLink(t, n, inPre)
			return
		case tag == "td" || tag == "th":
			t.pendingSp = true
		case blockTags[tag]:
			t.lineBreak(paragraphTags[tag])
		}
		if tag == "li" {
			t.word("-")
			t.pendingSp = true
		}
		renderChildren(t, n, inPre || tag == "pre")
		if tag == "td" || tag == "th" {
			t.pendingSp = true
		} else if blockTags[tag] {
			t.lineBreak(paragraphTags[tag])
		}
		return
	}
	renderChildren(t, n, inPre)
}

func renderChildren(t *textBuffer, n *html.Node, inPre bool) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		renderHTML(t, c, inPre)
	}
}

func renderLink(t *textBuffer, n *html.Node, inPre bool) {
	start := t.b.Len()
	renderChildren(t, n, inPre)
	label := strings.TrimSpace(t.b.String()[start:])
	href := ""
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, "href") {
			href = strings.TrimSpace(a.Val)
		}
	}
	lower := strings.ToLower(href)
	if label == "" || !(strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://")) ||
		strings.Contains(label, href) {
		return
	}
	t.pendingSp = true
	t.word("(" + href + ")")
}
