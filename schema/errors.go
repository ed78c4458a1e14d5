package schema

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/xeipuuv/gojsonschema"
)

// Error is a validation failure. Syntax errors are HTTP 400 code invalid_request; the rest
// are HTTP 422 code invalid_argument (spec section 7.3, API-NOTES decisions table).
//
// Message is safe to show to the client and starts with Field. Field is empty only when the
// request body as a whole is at fault (not JSON, not an object, not UTF-8).
type Error struct {
	Syntax  bool   // true -> 400 invalid_request (bad JSON, body not an object, repeated scalar query param)
	Field   string // e.g. "to[3]", "limit", "attachments[0].content", "query"
	Message string // client-safe, names the field, e.g. `to[3]: must be an email address of at most 254 characters`
}

func (e *Error) Error() string { return e.Message }

// invalid returns a 422 error about field.
func invalid(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// syntaxError returns a 400 error. field may be empty when the whole body is at fault.
func syntaxError(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return &Error{Syntax: true, Field: field, Message: msg}
}

// fieldKey and fieldIndex build the client-facing field names: "attachments[0].content".
func fieldKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func fieldIndex(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// combinators are summary errors ("did not match anyOf") that gojsonschema reports beside
// the specific errors of the closest branch; the specific ones say more.
var combinators = map[string]bool{"number_any_of": true, "number_one_of": true, "number_all_of": true}

// schemaErrors turns gojsonschema's result errors into client-facing errors, in a stable
// order (gojsonschema's order follows Go map iteration). root is the schema that was
// validated, doc the decoded instance and rootField the name of the instance itself ("" for
// a body or query, the parameter name for a path parameter). noun names an unknown
// property: "field" or "query parameter".
func schemaErrors(root map[string]any, doc any, errs []gojsonschema.ResultError, rootField, noun string) []*Error {
	var specific, summary []*Error
	for _, re := range errs {
		segs := strings.Split(re.Context().String("\x00"), "\x00")[1:] // drop "(root)"
		if p, ok := re.Details()["property"].(string); ok && (re.Type() == "required" || re.Type() == "additional_property_not_allowed") {
			segs = append(segs, p)
		}
		field := fieldPath(doc, segs, rootField)
		msg := describe(re, schemasAt(root, segs), noun)
		name := field
		if name == "" {
			name = "body"
		}
		e := &Error{Field: field, Message: name + ": " + msg}
		if combinators[re.Type()] {
			summary = append(summary, e)
		} else {
			specific = append(specific, e)
		}
	}
	out := specific
	if len(out) == 0 {
		out = summary
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Field != out[j].Field {
			return out[i].Field < out[j].Field
		}
		return out[i].Message < out[j].Message
	})
	return out
}

// fieldPath names the instance location segs in the client's terms, walking doc to tell
// an array index ("to[3]") from an object key ("attachments[0].content").
func fieldPath(doc any, segs []string, rootField string) string {
	path, cur := rootField, doc
	for _, seg := range segs {
		switch c := cur.(type) {
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return fieldKey(path, seg)
			}
			path, cur = fieldIndex(path, i), c[i]
		case map[string]any:
			path, cur = fieldKey(path, seg), c[seg]
		default:
			path, cur = fieldKey(path, seg), nil
		}
	}
	return path
}

// schemasAt returns the schemas that apply at the instance location segs, looking through
// anyOf, oneOf and allOf, so an error message can use the bounds and description of the
// schema the failing value was meant to match.
func schemasAt(s map[string]any, segs []string) []map[string]any {
	cands := flatten(s)
	if len(segs) == 0 {
		return cands
	}
	var out []map[string]any
	for _, c := range cands {
		if props, ok := c["properties"].(map[string]any); ok {
			if p, ok := props[segs[0]].(map[string]any); ok {
				out = append(out, schemasAt(p, segs[1:])...)
				continue
			}
		}
		if items, ok := c["items"].(map[string]any); ok {
			if _, err := strconv.Atoi(segs[0]); err == nil {
				out = append(out, schemasAt(items, segs[1:])...)
			}
		}
	}
	return out
}

func flatten(s map[string]any) []map[string]any {
	out := []map[string]any{s}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		branches, _ := s[k].([]any)
		for _, b := range branches {
			if m, ok := b.(map[string]any); ok {
				out = append(out, flatten(m)...)
			}
		}
	}
	return out
}

// describe writes the part of the message after "FIELD: ".
func describe(re gojsonschema.ResultError, cands []map[string]any, noun string) string {
	d := re.Details()
	switch re.Type() {
	case "required":
		return "is required"
	case "additional_property_not_allowed":
		return "is not a known " + noun
	case "array_min_items":
		return "must have at least " + plural(d["min"], "item")
	case "array_max_items":
		return "must have at most " + plural(d["max"], "item")
	case "string_gte":
		if description(cands) == "" {
			if fmt.Sprint(d["min"]) == "1" {
				return "must not be empty"
			}
			return "must be at least " + plural(d["min"], "character")
		}
	case "string_lte":
		if description(cands) == "" {
			return "must be at most " + plural(d["max"], "character")
		}
	case "number_not":
		return "has a property this response must not have"
	case "number_any_of", "number_one_of", "number_all_of":
		return "does not match any of the allowed shapes"
	}
	if want := expectation(cands); want != "" {
		return "must be " + want
	}
	return strings.ToLower(re.Description())
}

func plural(n any, unit string) string {
	s := fmt.Sprint(n)
	if s == "1" {
		return s + " " + unit
	}
	return s + " " + unit + "s"
}

// description returns the first description among the candidate string schemas; in this
// package a string schema's description completes "must be ...".
func description(cands []map[string]any) string {
	for _, c := range cands {
		if d, ok := c["description"].(string); ok && hasType(c, "string") {
			return d
		}
	}
	return ""
}

func hasType(s map[string]any, t string) bool {
	switch v := s["type"].(type) {
	case string:
		return v == t
	case []any:
		for _, x := range v {
			if x == t {
				return true
			}
		}
	}
	return false
}

// expectation says what a valid value looks like, e.g. "an integer from 1 to 100", "one of
// low, normal, high, critical", or "a group name of 1-64 characters ... or null".
func expectation(cands []map[string]any) string {
	// Enums and consts first; the triage branches each pin status with a const, so the
	// allowed values are collected across all candidates.
	var vals []string
	for _, c := range cands {
		if enum, ok := c["enum"].([]any); ok {
			for _, e := range enum {
				vals = append(vals, literal(e))
			}
		}
		if cst, ok := c["const"]; ok {
			vals = append(vals, literal(cst))
		}
	}
	switch len(vals) {
	case 0:
	case 1:
		return vals[0]
	default:
		return "one of " + strings.Join(vals, ", ")
	}
	var parts []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			parts = append(parts, p)
		}
	}
	for _, c := range cands {
		var types []any
		switch t := c["type"].(type) {
		case string:
			types = []any{t}
		case []any:
			types = t
		}
		for _, t := range types {
			switch t {
			case "string":
				if d := description(cands); d != "" {
					add(d)
				} else {
					add("a string")
				}
			case "integer":
				add(numberPhrase("an integer", c))
			case "number":
				add(numberPhrase("a number", c))
			case "boolean":
				add("true or false")
			case "array":
				add("an array")
			case "object":
				add("an object")
			case "null":
				add("null")
			}
		}
	}
	// "null or a group name of ..." reads better than a trailing "or null".
	for i, p := range parts {
		if p == "null" && len(parts) > 1 {
			parts = append([]string{"null"}, append(parts[:i:i], parts[i+1:]...)...)
			break
		}
	}
	return strings.Join(parts, " or ")
}

func numberPhrase(noun string, s map[string]any) string {
	lo, hasLo := s["minimum"]
	hi, hasHi := s["maximum"]
	xlo, hasXlo := s["exclusiveMinimum"]
	switch {
	case hasLo && hasHi:
		return fmt.Sprintf("%s from %v to %v", noun, lo, hi)
	case hasLo:
		return fmt.Sprintf("%s of at least %v", noun, lo)
	case hasXlo && hasHi:
		return fmt.Sprintf("%s greater than %v and at most %v", noun, xlo, hi)
	case hasXlo:
		return fmt.Sprintf("%s greater than %v", noun, xlo)
	case hasHi:
		return fmt.Sprintf("%s of at most %v", noun, hi)
	}
	return noun
}

// literal writes a JSON value for a message: strings bare, everything else as JSON.
func literal(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
