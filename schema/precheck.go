package schema

import (
	"strings"
	"unicode/utf8"
)

// precheck runs, in Go and before gojsonschema, the checks that gojsonschema would make
// slow. gojsonschema evaluates every keyword even after one has failed, and Go's regexp
// needs about 100 ns per character, so a pattern over megabytes costs a third of a second:
//   - a string longer than its schema's maxLength fails here at once, so no pattern ever
//     runs over an oversized value (a 5 MiB subject, say);
//   - a string whose schema has contentEncoding "base64" must be canonical standard base64.
//     That check is stricter than the schema's pattern, which forValidation therefore
//     leaves out of the compiled schema; the OpenAPI document keeps it for clients.
//
// It follows properties and items through anyOf, oneOf and allOf, like the error messages.
func precheck(s map[string]any, v any, path string) *Error {
	cands := flatten(s)
	switch v := v.(type) {
	case string:
		if max, ok := maxLength(cands); ok && len(v) > max && utf8.RuneCountInString(v) > max {
			if d := description(cands); d != "" {
				return invalid(fieldName(path), "must be %s", d)
			}
			return invalid(fieldName(path), "must be at most %s", plural(max, "character"))
		}
		if isBase64(cands) && !canonicalBase64(v) {
			return invalid(fieldName(path), "must be canonical standard base64: padded with = to a multiple of 4 characters, with unused bits zero")
		}
	case []any:
		for _, c := range cands {
			if items, ok := c["items"].(map[string]any); ok {
				for i, x := range v {
					if e := precheck(items, x, fieldIndex(path, i)); e != nil {
						return e
					}
				}
				break
			}
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			for _, c := range cands {
				props, _ := c["properties"].(map[string]any)
				if p, ok := props[k].(map[string]any); ok {
					if e := precheck(p, v[k], fieldKey(path, k)); e != nil {
						return e
					}
					break
				}
			}
		}
	}
	return nil
}

func fieldName(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// maxLength is the largest maxLength among the candidate schemas that accept strings; ok
// is false when one of them accepts strings of any length.
func maxLength(cands []map[string]any) (max int, ok bool) {
	max = -1
	for _, c := range cands {
		if _, typed := c["type"]; typed && !hasType(c, "string") {
			continue
		}
		n, has := intKeyword(c, "maxLength")
		if !has {
			if hasType(c, "string") {
				return 0, false
			}
			continue
		}
		if n > max {
			max = n
		}
	}
	return max, max >= 0
}

func intKeyword(s map[string]any, k string) (int, bool) {
	switch n := s[k].(type) {
	case interface{ Int64() (int64, error) }: // json.Number
		i, err := n.Int64()
		return int(i), err == nil
	case int:
		return n, true
	case float64:
		return int(n), true
	}
	return 0, false
}

func isBase64(cands []map[string]any) bool {
	for _, c := range cands {
		if c["contentEncoding"] == "base64" {
			return true
		}
	}
	return false
}

// forValidation returns the copy of a schema that gojsonschema compiles: the pattern of a
// contentEncoding base64 string is left out, since precheck's canonical check covers it.
func forValidation(s map[string]any) map[string]any {
	out := deepCopy(s).(map[string]any)
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["contentEncoding"] == "base64" {
				delete(v, "pattern")
			}
			for _, x := range v {
				strip(x)
			}
		case []any:
			for _, x := range v {
				strip(x)
			}
		}
	}
	strip(out)
	return out
}

// base64Value maps a byte to its value in the standard base64 alphabet, or -1.
var base64Value = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		t[c] = int8(i)
	}
	return t
}()

// canonicalBase64 reports whether s is the one standard, padded base64 encoding of its
// bytes, so the stored attachment and the idempotency fingerprint do not depend on how a
// client happened to encode it. It is what decoding and re-encoding would tell, without
// either: length a multiple of 4, only alphabet characters before at most two '=', and
// zero bits where the last character holds more bits than the data needs.
func canonicalBase64(s string) bool {
	if len(s)%4 != 0 {
		return false
	}
	data := strings.TrimSuffix(strings.TrimSuffix(s, "="), "=")
	for i := 0; i < len(data); i++ {
		if base64Value[data[i]] < 0 {
			return false
		}
	}
	if len(data) == len(s) {
		return true
	}
	last := base64Value[data[len(data)-1]]
	if len(s)-len(data) == 2 {
		return last&0x0f == 0 // one byte in 12 bits
	}
	return last&0x03 == 0 // two bytes in 18 bits
}

// decodedLen is the number of bytes a canonical base64 string encodes.
func decodedLen(s string) int {
	return len(s)/4*3 - (len(s) - len(strings.TrimRight(s, "=")))
}
