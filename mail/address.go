package mail

import (
	netmail "net/mail"
	"regexp"
	"strings"
	"unicode"
)

// addressParser uses headerDecoder, which never fails on an unknown
// charset: the API keeps bare addresses only, so a display name it cannot
// read must not lose the address.
var addressParser = &netmail.AddressParser{WordDecoder: headerDecoder}

// NormalizeAddress parses one address, with or without a display name, and
// returns it bare and lowercased.
func NormalizeAddress(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "\r\n") {
		return "", false
	}
	if a, err := addressParser.Parse(s); err == nil {
		return bareAddress(a.Address)
	}
	// Senders write display names net/mail refuses (unquoted dots, commas,
	// 8-bit bytes); the part in angle brackets is still the address.
	if m := angleAddrRE.FindAllStringSubmatch(s, -1); len(m) == 1 {
		return bareAddress(m[0][1])
	}
	if !strings.ContainsAny(s, "<> \t,;\"") {
		return bareAddress(s)
	}
	return "", false
}

var angleAddrRE = regexp.MustCompile(`<([^<>\s]+@[^<>\s]+)>`)

// looseAddrRE finds addresses in text too broken for any parser.
var looseAddrRE = regexp.MustCompile(`[^\s<>(),;:"\[\]]+@[^\s<>(),;:"\[\]]+`)

// bareAddress checks the shape the API promises: local@domain, no spaces
// or controls, lowercased.
func bareAddress(a string) (string, bool) {
	a = strings.ToLower(strings.TrimSpace(Clean(a)))
	at := strings.LastIndexByte(a, '@')
	if at <= 0 || at == len(a)-1 || len(a) > 254 {
		return "", false
	}
	for _, r := range a {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '<' || r == '>' {
			return "", false
		}
	}
	return a, true
}

// parseAddressList reads every address of one or more address headers,
// flattening groups and tolerating the malformed lists real mail carries.
// The result is never nil and has no duplicates.
func parseAddressList(values []string) []string {
	out := []string{}
	seen := map[string]bool{}
	add := func(a string) {
		if a, ok := bareAddress(a); ok && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if list, err := addressParser.ParseList(v); err == nil {
			for _, a := range list {
				add(a.Address)
			}
			continue
		}
		for _, piece := range splitAddressList(v) {
			if a, ok := NormalizeAddress(piece); ok && strings.Count(piece, "@") == 1 {
				add(a)
				continue
			}
			for _, a := range looseAddrRE.FindAllString(piece, -1) {
				add(a)
			}
		}
	}
	return out
}

// splitAddressList splits at commas and semicolons outside quotes, angle
// brackets and comments, and drops group names ("team: a@x, b@y;").
func splitAddressList(v string) []string {
	var pieces []string
	var cur strings.Builder
	quoted, angle, comment := false, false, 0
	flush := func() {
		if p := strings.TrimSpace(cur.String()); p != "" {
			pieces = append(pieces, p)
		}
		cur.Reset()
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case quoted:
			if c == '\\' && i+1 < len(v) {
				cur.WriteByte(c)
				i++
				c = v[i]
			} else if c == '"' {
				quoted = false
			}
		case c == '"':
			quoted = true
		case c == '(':
			comment++
		case c == ')' && comment > 0:
			comment--
		case comment > 0:
		case c == '<':
			angle = true
		case c == '>':
			angle = false
		case !angle && (c == ',' || c == ';'):
			flush()
			continue
		case !angle && c == ':':
			// A group name ends here; what came before is not an address.
			cur.Reset()
			continue
		}
		cur.WriteByte(c)
	}
	flush()
	return pieces
}
