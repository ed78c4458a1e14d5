package schema

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// MaxRecipients is how many recipients (to + cc + bcc together) one message may have
// (spec section 8). It is the one home of the limit: the request check below applies it
// to what a client names, and mail applies it to the recipients a reply ends up with.
const MaxRecipients = 50

// Limits that JSON Schema cannot express because they span fields (spec section 8,
// API-NOTES sections 10, 11 and 16).
const (
	maxBodyBytes      = 512 << 10 // UTF-8 bytes of text + html
	maxAttachmentSize = 2 << 20   // decoded bytes of all attachments together
	maxAddressLength  = 254       // username@domain
)

// quarantinedLabel is set by the scanner only; API clients can never set or clear it. It
// is db.LabelQuarantined, whose rule db.CheckLabelChange applies to label changes; schema
// imports nothing of inboxd, so it names the label again for send and reply, and a test
// ties the two.
const quarantinedLabel = "quarantined"

// crossField applies the rules that span fields. It runs on a body that has passed its
// schema, so it may rely on the types the schema promises.
func crossField(opID string, body map[string]any) *Error {
	switch opID {
	case "send":
		return checkOutgoing(body, true)
	case "reply":
		// A reply needs no body of its own: the spec requires text or html for send only,
		// and a reply that ends up without recipients is the server's invalid_reply.
		return checkOutgoing(body, false)
	case "createInbox":
		return checkAddress(body)
	}
	return nil
}

func checkOutgoing(body map[string]any, needBody bool) *Error {
	for _, l := range stringList(body["labels"]) {
		if l == quarantinedLabel {
			return invalid("labels", "may not contain %q: quarantine is set by the scanner and released only by human review", quarantinedLabel)
		}
	}

	n, first := 0, ""
	for _, f := range []string{"to", "cc", "bcc"} {
		if list, ok := body[f].([]any); ok {
			n += len(list)
			if first == "" {
				first = f
			}
		}
	}
	if n > MaxRecipients {
		return invalid(first, "to, cc and bcc together may have at most %d recipients, not %d", MaxRecipients, n)
	}

	text, hasText := body["text"].(string)
	html, hasHTML := body["html"].(string)
	if needBody && strings.TrimSpace(text) == "" && strings.TrimSpace(html) == "" {
		return invalid("text", "text or html is required and may not be blank")
	}
	if len(text)+len(html) > maxBodyBytes {
		field := "text"
		if !hasText && hasHTML {
			field = "html"
		}
		return invalid(field, "text and html together must be at most 512 KiB (%d bytes) of UTF-8, not %d bytes", maxBodyBytes, len(text)+len(html))
	}

	// precheck has already made sure every content is canonical base64.
	attachments, _ := body["attachments"].([]any)
	total := 0
	for _, a := range attachments {
		content, _ := a.(map[string]any)["content"].(string)
		total += decodedLen(content)
	}
	if total > maxAttachmentSize {
		return invalid("attachments", "must be at most 2 MiB (%d bytes) together after base64 decoding, not %d bytes", maxAttachmentSize, total)
	}
	return nil
}

// checkAddress makes sure createInbox names an address that the rest of the API accepts:
// the username pattern allows "a..b" and "a.", which no inboxId path could then reach.
func checkAddress(body map[string]any) *Error {
	user, _ := body["username"].(string)
	// The default domain is known only to the server; any valid domain tests the local part.
	if !ValidEmail(user + "@example.com") {
		return invalid("username", "may not contain consecutive dots or end with a dot, since it becomes the local part of an email address")
	}
	domain, ok := body["domain"].(string)
	if !ok {
		return nil
	}
	addr := user + "@" + domain
	if utf8.RuneCountInString(addr) > maxAddressLength {
		return invalid("domain", "username@domain must be at most %d characters, not %d", maxAddressLength, utf8.RuneCountInString(addr))
	}
	if !ValidEmail(addr) {
		return invalid("domain", "must end in a top-level domain of 2 or more letters, such as example.com")
	}
	return nil
}

// stringList returns the strings of a JSON array value (nil for anything else).
func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// checkText rejects NUL characters and lone UTF-16 surrogates in any string of the body
// (API-NOTES section 3). encoding/json silently turns a lone "\ud800" into U+FFFD, so the
// surrogates are looked for in the raw JSON.
func checkText(raw []byte, doc any) *Error {
	if field, ok := nulField(doc, ""); ok {
		return invalid(field, "may not contain NUL characters")
	}
	if hasLoneSurrogate(raw) {
		if field, ok := surrogateField(raw, ""); ok {
			return invalid(field, "may not contain unpaired UTF-16 surrogates")
		}
	}
	return nil
}

func nulField(v any, path string) (string, bool) {
	switch v := v.(type) {
	case string:
		return path, strings.IndexByte(v, 0) >= 0
	case []any:
		for i, x := range v {
			if f, ok := nulField(x, fieldIndex(path, i)); ok {
				return f, true
			}
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			if f, ok := nulField(v[k], fieldKey(path, k)); ok {
				return f, true
			}
		}
	}
	return "", false
}

// surrogateField finds the string of raw (valid JSON) that holds a lone surrogate escape.
func surrogateField(raw json.RawMessage, path string) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		return path, hasLoneSurrogate(raw)
	case '[':
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return "", false
		}
		for i, x := range list {
			if f, ok := surrogateField(x, fieldIndex(path, i)); ok {
				return f, true
			}
		}
	case '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return "", false
		}
		for _, k := range sortedKeys(obj) {
			if f, ok := surrogateField(obj[k], fieldKey(path, k)); ok {
				return f, true
			}
		}
	}
	return "", false
}

// hasLoneSurrogate scans valid JSON text for a \uD800-\uDBFF escape not followed by a
// \uDC00-\uDFFF escape, or a \uDC00-\uDFFF escape on its own. Outside strings valid JSON
// has no backslashes, so scanning a whole document is exact.
func hasLoneSurrogate(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character; skipping it also skips an escaped backslash
		if i >= len(raw) || raw[i] != 'u' || i+4 >= len(raw) {
			continue
		}
		r := hex4(raw[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo := hex4(raw[i+3 : i+7]); lo >= 0xDC00 && lo <= 0xDFFF {
					i += 6
					continue
				}
			}
			return true
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		}
	}
	return false
}

// hex4 decodes four hex digits; -1 if they are not.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}
