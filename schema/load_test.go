package schema

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	qt "github.com/frankban/quicktest"
)

func TestNew(t *testing.T) {
	c := qt.New(t)
	v, err := New()
	c.Assert(err, qt.IsNil)
	gets := 0
	for _, op := range Operations() {
		if op.Method == "GET" {
			gets++
		}
	}
	c.Check(v.response, qt.HasLen, len(Operations()))
	c.Check(v.query, qt.HasLen, gets)                                    // the GET operations
	c.Check(v.body, qt.HasLen, len(Operations())-gets)                   // POST, PATCH and DELETE
	c.Check(len(v.path) >= 4, qt.IsTrue, qt.Commentf("%d", len(v.path))) // inboxId, messageId, threadId, attachmentId and the extensions' ids
}

func TestInliner(t *testing.T) {
	raw := map[string]any{
		"a":     map[string]any{"type": "string", "$comment": "dropped"},
		"b":     map[string]any{"type": "array", "items": map[string]any{"$ref": "defs.json#/a"}},
		"loop1": map[string]any{"items": map[string]any{"$ref": "defs.json#/loop2"}},
		"loop2": map[string]any{"items": map[string]any{"$ref": "defs.json#/loop1"}},
	}
	inline := func(v any) (any, error) {
		in := &inliner{raw: raw, done: map[string]any{}}
		return in.inline(v, nil)
	}
	c := qt.New(t)

	got, err := inline(map[string]any{"$ref": "defs.json#/b", "maxItems": 3})
	c.Assert(err, qt.IsNil)
	c.Check(got, qt.DeepEquals, map[string]any{"type": "array", "maxItems": 3, "items": map[string]any{"type": "string"}})

	_, err = inline(map[string]any{"$ref": "defs.json#/a", "type": "integer"})
	c.Check(err, qt.ErrorMatches, `.*"type" beside \$ref "defs.json#/a" would replace.*`)
	_, err = inline(map[string]any{"$ref": "defs.json#/nope"})
	c.Check(err, qt.ErrorMatches, `.*defs.json#/nope is not defined`)
	_, err = inline(map[string]any{"$ref": "#/definitions/a"})
	c.Check(err, qt.ErrorMatches, `.*only defs.json#/NAME references are supported`)
	_, err = inline(map[string]any{"$ref": "defs.json#/loop1"})
	c.Check(err, qt.ErrorMatches, `.*loop1 -> loop2 -> loop1.*`)

	// Each reference is its own copy: changing one cannot change another.
	x, _ := inline([]any{map[string]any{"$ref": "defs.json#/a"}, map[string]any{"$ref": "defs.json#/a"}})
	x.([]any)[0].(map[string]any)["type"] = "changed"
	c.Check(x.([]any)[1].(map[string]any)["type"], qt.Equals, "string")
}

// walkSchemas calls f on every schema object reachable from s, with a path for messages.
func walkSchemas(s map[string]any, path string, f func(s map[string]any, path string)) {
	f(s, path)
	if props, ok := s["properties"].(map[string]any); ok {
		for _, k := range sortedKeys(props) {
			walkSchemas(props[k].(map[string]any), path+".properties."+k, f)
		}
	}
	for _, k := range []string{"items", "not"} {
		if sub, ok := s[k].(map[string]any); ok {
			walkSchemas(sub, path+"."+k, f)
		}
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if list, ok := s[k].([]any); ok {
			for i, sub := range list {
				walkSchemas(sub.(map[string]any), fmt.Sprintf("%s.%s[%d]", path, k, i), f)
			}
		}
	}
}

// everySchema visits the schemas that feed validation and the OpenAPI document.
func everySchema(t *testing.T, f func(s map[string]any, path string, input bool)) {
	src := validator(t).src
	for _, id := range sortedKeys(src.contracts) {
		ct := src.contracts[id]
		if ct.query != nil {
			walkSchemas(ct.query, id+".query", func(s map[string]any, p string) { f(s, p, true) })
		}
		if ct.body != nil {
			walkSchemas(ct.body, id+".body", func(s map[string]any, p string) { f(s, p, true) })
		}
		walkSchemas(ct.response, id+".response", func(s map[string]any, p string) { f(s, p, false) })
	}
	for _, name := range sortedKeys(src.path) {
		walkSchemas(src.path[name], "path."+name, func(s map[string]any, p string) { f(s, p, true) })
	}
	walkSchemas(src.defs["error"].(map[string]any), "error", func(s map[string]any, p string) { f(s, p, false) })
}

// gojsonschema reads the schemas as draft-07 and OpenAPI clients as 2020-12. Only keywords
// both drafts read the same way may appear; items must be one schema (a tuple means
// different things in the two), and exclusiveMinimum must be a number.
func TestSchemasUseKeywordsBothDraftsShare(t *testing.T) {
	allowed := map[string]bool{
		"type": true, "properties": true, "required": true, "additionalProperties": true,
		"items": true, "minItems": true, "maxItems": true, "minLength": true, "maxLength": true,
		"pattern": true, "format": true, "enum": true, "const": true, "minimum": true,
		"maximum": true, "exclusiveMinimum": true, "anyOf": true, "oneOf": true, "allOf": true,
		"not": true, "default": true, "description": true,
		"contentEncoding": true, // an annotation in both; precheck.go acts on it
	}
	everySchema(t, func(s map[string]any, path string, _ bool) {
		for k := range s {
			if !allowed[k] {
				t.Errorf("%s: keyword %q is not shared by draft-07 and 2020-12 here", path, k)
			}
		}
		if it, ok := s["items"]; ok {
			if _, isSchema := it.(map[string]any); !isSchema {
				t.Errorf("%s: items must be a single schema", path)
			}
		}
		if x, ok := s["exclusiveMinimum"]; ok {
			if _, isBool := x.(bool); isBool {
				t.Errorf("%s: exclusiveMinimum must be a number", path)
			}
		}
		if s["contentEncoding"] != nil && (s["contentEncoding"] != "base64" || s["pattern"] == nil) {
			t.Errorf("%s: contentEncoding is base64, with the pattern kept for clients", path)
		}
		if ap, ok := s["additionalProperties"]; ok && ap != false {
			t.Errorf("%s: additionalProperties is either absent or false", path)
		}
	})
}

// A client who breaks a pattern should be told what is expected, not shown a regex.
func TestInputPatternsHaveDescriptions(t *testing.T) {
	everySchema(t, func(s map[string]any, path string, input bool) {
		if _, ok := s["pattern"]; ok && input && s["description"] == nil {
			t.Errorf("%s: an input string with a pattern needs a description for its error message", path)
		}
		if d, ok := s["description"].(string); ok && hasType(s, "string") && strings.HasPrefix(d, "must") {
			t.Errorf("%s: a description completes 'must be ...': %q", path, d)
		}
	})
}

// Every object in the inputs and outputs is closed, so a typo in a field name is caught.
func TestObjectsAreStrict(t *testing.T) {
	everySchema(t, func(s map[string]any, path string, _ bool) {
		if hasType(s, "object") && s["additionalProperties"] != false {
			t.Errorf("%s: object without additionalProperties false", path)
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	v := validator(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				q := url.Values{"limit": {fmt.Sprint(j%120 + 1)}, "labels": {"a", "b"}}
				_, _ = v.Query("listMessages", q)
				_ = v.Body("send", []byte(fmt.Sprintf(`{"to":["u%d@example.com"],"text":"hi","idempotencyKey":"k%d"}`, i, j)))
				_ = v.Path("inboxId", fmt.Sprintf("u%d@example.com", j))
				_ = v.Response("deleteInbox", []byte(`{"deleted":true}`))
				_ = ValidEmail("a@b.co")
				if j%25 == 0 {
					_, _ = v.OpenAPI("http://x")
				}
			}
		}()
	}
	wg.Wait()
}
