package schema

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// DuplicateKey reports the first key that appears twice in one object of raw, which must
// be valid JSON, as a 422 naming the key by its path ("to", "attachments[0].filename").
// RFC 8259 leaves the meaning of a repeated name open and decoders keep the last one
// silently, so two "to" fields would send to the second, and a proxy reading the first
// would see another request than the server. depth limits the check to objects at most
// that deep (the outermost value is at depth 1); 0 checks every object.
func DuplicateKey(raw []byte, depth int) error {
	if e := duplicateKey(raw, depth); e != nil {
		return e
	}
	return nil
}

func duplicateKey(raw []byte, depth int) *Error {
	s := keyScanner{raw: raw, maxDepth: depth}
	path := s.value()
	if path == nil {
		return nil
	}
	slices.Reverse(path)
	field := ""
	for _, p := range path {
		if p.index >= 0 {
			field = fieldIndex(field, p.index)
		} else {
			field = fieldKey(field, p.key)
		}
	}
	return invalid(field, "appears more than once in its object; give each key once")
}

// keyScanner walks valid JSON once without decoding it: it runs on every request body (up
// to 5 MiB, mostly long strings), so it jumps over string contents with bytes.IndexByte
// and allocates only for keys written with escapes and for objects of many keys.
type keyScanner struct {
	raw      []byte
	i        int
	depth    int // of the object being scanned
	maxDepth int // 0: no limit
}

// step is one segment of the path to a repeated key: an object key, or an array index
// (index >= 0). A path is built only once a repeated key is found, innermost step first.
type step struct {
	key   string
	index int
}

// value scans the value at s.i and returns the path, inside it, of its first repeated key.
func (s *keyScanner) value() []step {
	s.space()
	switch s.raw[s.i] {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		s.str()
	default: // a number, true, false or null
		for s.i < len(s.raw) && !endsLiteral(s.raw[s.i]) {
			s.i++
		}
	}
	return nil
}

func endsLiteral(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

func (s *keyScanner) object() []step {
	s.i++ // {
	s.depth++
	defer func() { s.depth-- }()
	check := s.maxDepth == 0 || s.depth <= s.maxDepth
	var keys keySet
	for {
		s.space()
		if s.raw[s.i] == '}' {
			s.i++
			return nil
		}
		key := s.key()
		if check && keys.add(key) {
			return []step{{key: string(key), index: -1}}
		}
		s.space()
		s.i++ // :
		if path := s.value(); path != nil {
			return append(path, step{key: string(key), index: -1})
		}
		s.space()
		if s.raw[s.i] == ',' {
			s.i++
		}
	}
}

func (s *keyScanner) array() []step {
	s.i++ // [
	for n := 0; ; n++ {
		s.space()
		if s.raw[s.i] == ']' {
			s.i++
			return nil
		}
		if path := s.value(); path != nil {
			return append(path, step{index: n})
		}
		s.space()
		if s.raw[s.i] == ',' {
			s.i++
		}
	}
}

func (s *keyScanner) space() {
	for s.i < len(s.raw) {
		switch s.raw[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// str moves past the string at s.i and returns its contents, still escaped.
func (s *keyScanner) str() []byte {
	start := s.i + 1
	for end := start; ; end++ {
		end += bytes.IndexByte(s.raw[end:], '"')
		backslashes := 0
		for p := end - 1; p >= start && s.raw[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 { // not itself escaped
			s.i = end + 1
			return s.raw[start:end]
		}
	}
}

// key reads an object key as the decoder would: "user\u006eame" is "username", and bytes
// that are not UTF-8 are U+FFFD (request bodies are UTF-8, but MCP messages are not checked).
func (s *keyScanner) key() []byte {
	start := s.i
	k := s.str()
	if bytes.IndexByte(k, '\\') < 0 && utf8.Valid(k) {
		return k
	}
	var decoded string
	json.Unmarshal(s.raw[start:s.i], &decoded) // valid JSON: it cannot fail
	return []byte(decoded)
}

// keySet holds the keys of one object: up to fewKeys in an array on the stack (every valid
// body's objects fit), more in a map, so an object of 100,000 keys costs 100,000 lookups
// rather than their square.
type keySet struct {
	few  [fewKeys][]byte
	n    int
	many map[string]struct{}
}

const fewKeys = 16

// add records key and reports whether it was there already.
func (k *keySet) add(key []byte) bool {
	if k.many == nil {
		for _, x := range k.few[:k.n] {
			if bytes.Equal(x, key) {
				return true
			}
		}
		if k.n < fewKeys {
			k.few[k.n] = key
			k.n++
			return false
		}
		k.many = make(map[string]struct{}, 4*fewKeys)
		for _, x := range k.few {
			k.many[string(x)] = struct{}{}
		}
	}
	if _, dup := k.many[string(key)]; dup {
		return true
	}
	k.many[string(key)] = struct{}{}
	return false
}
