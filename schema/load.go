package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// The JSON files under json/ are the single source of every schema: validation (Query, Body,
// Path, Response), ValidEmail and the OpenAPI document are all built from what load returns.
//
//go:embed json
var files embed.FS

const refPrefix = "defs.json#/"

// contract is one operation's schemas, fully inlined (no $ref left). The query, body and
// path parameter schemas are plain maps so that other documents (the OpenAPI paths, and
// later the MCP tool input schemas, which merge path, query and body properties into one
// object) can be composed from them.
type contract struct {
	op       Operation
	query    map[string]any // GET only: an object schema, one property per query parameter
	body     map[string]any // non-GET only: an object schema of the JSON body
	response map[string]any // the 200 response body
	// rawBody and rawResponse are the body and response schemas as written, $refs to
	// defs.json kept: the OpenAPI document names them as components (openapi_names.go).
	rawBody, rawResponse any
}

// sources is everything load reads from json/.
type sources struct {
	defs      map[string]any            // defs.json, each entry already inlined
	rawDefs   map[string]any            // defs.json as written
	path      map[string]map[string]any // path parameter name -> string schema
	contracts map[string]*contract      // by operation ID
}

// emptyObject is the body of operations that take none (finishInboxSetup, deleteInbox)
// and the query of GET operations without parameters: nothing but {} is accepted.
func emptyObject() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{}}
}

// load reads and inlines every schema file and checks that the files and the operations
// table agree, so a mistake in the JSON fails New (and the tests), not a request.
func load() (*sources, error) {
	rawDefs, err := readJSON("json/defs.json")
	if err != nil {
		return nil, err
	}
	in := &inliner{raw: rawDefs, done: map[string]any{}}
	src := &sources{defs: map[string]any{}, rawDefs: rawDefs, path: map[string]map[string]any{}, contracts: map[string]*contract{}}
	for name := range rawDefs {
		if strings.HasPrefix(name, "$") {
			continue
		}
		v, err := in.resolve(name, nil)
		if err != nil {
			return nil, err
		}
		src.defs[name] = v
	}

	rawPath, err := readJSON("json/path.json")
	if err != nil {
		return nil, err
	}
	for name, v := range rawPath {
		if strings.HasPrefix(name, "$") {
			continue
		}
		s, err := in.object(v, "path.json#/"+name)
		if err != nil {
			return nil, err
		}
		src.path[name] = s
	}

	known := map[string]bool{}
	for _, op := range Operations() {
		known[op.ID] = true
		for _, p := range op.PathParams {
			if src.path[p] == nil {
				return nil, fmt.Errorf("schema: path.json has no schema for path parameter %q of %s", p, op.ID)
			}
		}
		c, err := loadContract(in, op)
		if err != nil {
			return nil, err
		}
		src.contracts[op.ID] = c
	}
	entries, err := fs.ReadDir(files, "json/ops")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if id := strings.TrimSuffix(e.Name(), ".json"); !known[id] {
			return nil, fmt.Errorf("schema: json/ops/%s names no operation", e.Name())
		}
	}
	return src, nil
}

func loadContract(in *inliner, op Operation) (*contract, error) {
	file := "json/ops/" + op.ID + ".json"
	raw, err := readJSON(file)
	if err != nil {
		return nil, err
	}
	c := &contract{op: op}
	for key, v := range raw {
		where := path.Base(file) + "#/" + key
		var s map[string]any
		if key != "$comment" {
			if s, err = in.object(v, where); err != nil {
				return nil, err
			}
		}
		switch key {
		case "$comment":
		case "query":
			if op.Method != "GET" {
				return nil, fmt.Errorf("schema: %s: a %s operation takes no query parameters", where, op.Method)
			}
			c.query = s
		case "body":
			if op.Method == "GET" {
				return nil, fmt.Errorf("schema: %s: a GET operation takes no body", where)
			}
			c.body, c.rawBody = s, v
		case "response":
			c.response, c.rawResponse = s, v
		default:
			return nil, fmt.Errorf("schema: %s: unknown key (want query, body or response)", where)
		}
	}
	if c.response == nil {
		return nil, fmt.Errorf("schema: %s has no response schema", file)
	}
	if op.Method == "GET" && c.query == nil {
		c.query = emptyObject()
	}
	if op.Method != "GET" && c.body == nil {
		c.body, c.rawBody = emptyObject(), emptyObject()
	}
	// Inputs are strict (API-NOTES section 3): an unknown field or parameter is an error.
	for what, s := range map[string]map[string]any{"query": c.query, "body": c.body} {
		if s == nil {
			continue
		}
		if s["type"] != "object" || s["additionalProperties"] != false {
			return nil, fmt.Errorf("schema: %s %s must be an object schema with additionalProperties false", op.ID, what)
		}
		if _, ok := s["properties"].(map[string]any); !ok {
			s["properties"] = map[string]any{}
		}
	}
	return c, nil
}

func readJSON(name string) (map[string]any, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := decodeJSON(b, &m); err != nil {
		return nil, fmt.Errorf("schema: %s: %w", name, err)
	}
	return m, nil
}

// decodeJSON decodes exactly one JSON value, keeping numbers as json.Number: gojsonschema
// expects them so, and they marshal back into the OpenAPI document unchanged.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}

// inliner replaces every {"$ref": "defs.json#/NAME"} with a copy of that definition, so
// each schema is self-contained: the OpenAPI document has no components.schemas (API-NOTES
// section 15) and gojsonschema resolves nothing at run time. Keywords beside a $ref are
// added to the copy; replacing a keyword the definition already has is refused, because in
// draft-07 such a sibling would be ignored and in 2020-12 both would apply.
type inliner struct {
	raw  map[string]any // defs.json as read
	done map[string]any // inlined definitions, by name
}

func (in *inliner) resolve(name string, stack []string) (any, error) {
	if v, ok := in.done[name]; ok {
		return deepCopy(v), nil
	}
	for _, s := range stack {
		if s == name {
			return nil, fmt.Errorf("schema: defs.json: %s refers to itself", strings.Join(append(stack, name), " -> "))
		}
	}
	def, ok := in.raw[name]
	if !ok || strings.HasPrefix(name, "$") {
		return nil, fmt.Errorf("schema: %s%s is not defined", refPrefix, name)
	}
	v, err := in.inline(def, append(stack, name))
	if err != nil {
		return nil, err
	}
	in.done[name] = v
	return deepCopy(v), nil
}

func (in *inliner) inline(v any, stack []string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		if ref, ok := v["$ref"]; ok {
			s, _ := ref.(string)
			if !strings.HasPrefix(s, refPrefix) {
				return nil, fmt.Errorf("schema: $ref %q: only %sNAME references are supported", ref, refPrefix)
			}
			target, err := in.resolve(strings.TrimPrefix(s, refPrefix), stack)
			if err != nil {
				return nil, err
			}
			if out, ok = target.(map[string]any); !ok {
				return nil, fmt.Errorf("schema: $ref %q is not a schema object", s)
			}
		}
		for k, sub := range v {
			if k == "$ref" || k == "$comment" {
				continue
			}
			if _, dup := out[k]; dup {
				return nil, fmt.Errorf("schema: %q beside $ref %q would replace the referenced schema's own %q", k, v["$ref"], k)
			}
			x, err := in.inline(sub, stack)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, sub := range v {
			x, err := in.inline(sub, stack)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	default:
		return v, nil
	}
}

// object inlines v and requires the result to be a schema object.
func (in *inliner) object(v any, where string) (map[string]any, error) {
	x, err := in.inline(v, nil)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, where)
	}
	m, ok := x.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema: %s is not a schema object", where)
	}
	return m, nil
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, sub := range v {
			out[k] = deepCopy(sub)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, sub := range v {
			out[i] = deepCopy(sub)
		}
		return out
	default:
		return v
	}
}

// sortedKeys returns the keys of m in order, for deterministic iteration.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
