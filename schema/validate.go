package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/xeipuuv/gojsonschema"
)

// Validator holds every schema compiled once. It is safe for concurrent use.
type Validator struct {
	src      *sources
	query    map[string]*querySchema // GET operations
	body     map[string]*compiled    // POST, PATCH and DELETE operations
	response map[string]*compiled
	path     map[string]*compiled // by path parameter name

	// The OpenAPI document for the last base URL asked for. Building it takes ~20 ms; the
	// server asks with the same URL every time. One entry only, in case a caller derives
	// the URL from a request header.
	openAPIMu   sync.Mutex
	openAPIBase string
	openAPIDoc  []byte
}

// compiled is a schema map together with its gojsonschema form: the map names fields and
// bounds in error messages, the compiled form validates.
type compiled struct {
	src    map[string]any
	schema *gojsonschema.Schema
}

type querySchema struct {
	compiled
	params map[string]queryParam
}

// queryParam is what Query needs to turn a query string value into a JSON value.
type queryParam struct {
	typ string // "integer", "boolean", "array" (of strings) or "string"
	def any    // default value, nil if none
}

// New compiles every schema exactly once (gojsonschema).
func New() (*Validator, error) {
	src, err := load()
	if err != nil {
		return nil, err
	}
	v := &Validator{
		src:      src,
		query:    map[string]*querySchema{},
		body:     map[string]*compiled{},
		response: map[string]*compiled{},
		path:     map[string]*compiled{},
	}
	for id, c := range src.contracts {
		if v.response[id], err = compile(c.response, id+" response"); err != nil {
			return nil, err
		}
		if c.body != nil {
			if v.body[id], err = compile(c.body, id+" body"); err != nil {
				return nil, err
			}
		}
		if c.query != nil {
			if v.query[id], err = compileQuery(c.query, id); err != nil {
				return nil, err
			}
		}
	}
	for name, s := range src.path {
		if v.path[name], err = compile(s, "path parameter "+name); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func compile(s map[string]any, what string) (*compiled, error) {
	sl := gojsonschema.NewSchemaLoader()
	// The files use keywords that draft-07 and 2020-12 read the same way; pinning the
	// draft keeps gojsonschema from guessing, and Validate checks each schema against the
	// draft-07 meta-schema.
	sl.Draft = gojsonschema.Draft7
	sl.AutoDetect = false
	sl.Validate = true
	schema, err := sl.Compile(gojsonschema.NewGoLoader(forValidation(s)))
	if err != nil {
		return nil, fmt.Errorf("schema: compiling %s: %w", what, err)
	}
	return &compiled{src: s, schema: schema}, nil
}

func compileQuery(s map[string]any, id string) (*querySchema, error) {
	c, err := compile(s, id+" query")
	if err != nil {
		return nil, err
	}
	q := &querySchema{compiled: *c, params: map[string]queryParam{}}
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		ps, _ := p.(map[string]any)
		typ, _ := ps["type"].(string)
		switch typ {
		case "integer", "boolean", "string":
		case "array":
			if items, _ := ps["items"].(map[string]any); items["type"] != "string" {
				return nil, fmt.Errorf("schema: %s query parameter %s: only arrays of strings can be sent as repeated parameters", id, name)
			}
		default:
			return nil, fmt.Errorf("schema: %s query parameter %s: type %q cannot be sent in a query string", id, name, ps["type"])
		}
		param := queryParam{typ: typ}
		if d, ok := ps["default"]; ok {
			if param.def, err = goValue(d, typ); err != nil {
				return nil, fmt.Errorf("schema: %s query parameter %s default: %w", id, name, err)
			}
		}
		q.params[name] = param
	}
	return q, nil
}

// validate runs the compiled schema over a decoded document (json.Number for numbers).
func (c *compiled) validate(doc any, rootField, noun string) []*Error {
	if e := precheck(c.src, doc, rootField); e != nil {
		return []*Error{e}
	}
	res, err := c.schema.Validate(gojsonschema.NewRawLoader(doc))
	if err != nil {
		// Only a loader failure gets here, and the raw loader cannot fail.
		return []*Error{{Field: rootField, Message: fmt.Sprintf("%s: cannot be validated: %v", rootField, err)}}
	}
	if res.Valid() {
		return nil
	}
	return schemaErrors(c.src, doc, res.Errors(), rootField, noun)
}

// Query validates a GET operation's query string and returns the values coerced and with
// defaults: integers as int, booleans as bool, arrays as []string (from repeated names,
// labels=a&labels=b), strings as string. A repeated scalar parameter is a Syntax error; an
// unknown parameter, a value that is not an integer (all digits) or boolean (exactly "true"
// or "false") where one is expected, or a schema violation is a 422 naming the parameter.
func (v *Validator) Query(opID string, q url.Values) (map[string]any, error) {
	qs, ok := v.query[opID]
	if !ok {
		return nil, fmt.Errorf("schema: %q is not a GET operation", opID)
	}
	names := sortedKeys(q)
	// Malformed syntax first: it is a 400 whatever else is wrong.
	for _, name := range names {
		if p, known := qs.params[name]; known && p.typ != "array" && len(q[name]) > 1 {
			return nil, syntaxError(name, "may be given only once")
		}
	}
	doc := map[string]any{}
	for _, name := range names {
		p, known := qs.params[name]
		if !known {
			if name == "" {
				return nil, &Error{Message: "a query parameter has an empty name"}
			}
			return nil, invalid(name, "is not a known query parameter of %s", opID)
		}
		for _, s := range q[name] {
			if !utf8.ValidString(s) {
				return nil, invalid(name, "must be valid UTF-8")
			}
			if strings.IndexByte(s, 0) >= 0 {
				return nil, invalid(name, "may not contain NUL characters")
			}
		}
		s := q[name][0]
		switch p.typ {
		case "integer":
			if s == "" || strings.Trim(s, "0123456789") != "" {
				return nil, invalid(name, "must be %s", expectation(schemasAt(qs.src, []string{name})))
			}
			if t := strings.TrimLeft(s, "0"); t != "" {
				s = t
			} else {
				s = "0"
			}
			doc[name] = json.Number(s)
		case "boolean":
			if s != "true" && s != "false" {
				return nil, invalid(name, "must be true or false")
			}
			doc[name] = s == "true"
		case "array":
			list := make([]any, len(q[name]))
			for i, x := range q[name] {
				list[i] = x
			}
			doc[name] = list
		default:
			doc[name] = s
		}
	}
	if errs := qs.validate(doc, "", "query parameter"); len(errs) > 0 {
		return nil, errs[0]
	}

	out := make(map[string]any, len(qs.params))
	for name, p := range qs.params {
		switch d := p.def.(type) {
		case nil:
		case []string: // a fresh slice, so a caller cannot change the default
			out[name] = append([]string(nil), d...)
		default:
			out[name] = d
		}
	}
	for name, x := range doc {
		val, err := goValue(x, qs.params[name].typ)
		if err != nil {
			return nil, invalid(name, "must be %s", expectation(schemasAt(qs.src, []string{name})))
		}
		out[name] = val
	}
	return out, nil
}

// QueryArguments validates a GET operation's query parameters given as JSON values, as
// the arguments of its MCP tool are (path parameters taken out, null meaning absent):
// each must have the JSON type the query string's text would be read as, so "2" is not
// a limit and [1] not a list of labels. Errors are 422s naming the argument.
func (v *Validator) QueryArguments(opID string, args map[string]any) error {
	qs, ok := v.query[opID]
	if !ok {
		return fmt.Errorf("schema: %q is not a GET operation", opID)
	}
	if errs := qs.validate(args, "", "argument"); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// goValue converts a JSON value (json.Number for numbers) to the Go type Query promises.
func goValue(x any, typ string) (any, error) {
	switch typ {
	case "integer":
		n, ok := x.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%v is not an integer", x)
		}
		return strconv.Atoi(n.String())
	case "boolean":
		b, ok := x.(bool)
		if !ok {
			return nil, fmt.Errorf("%v is not a boolean", x)
		}
		return b, nil
	case "array":
		list, ok := x.([]any)
		if !ok {
			return nil, fmt.Errorf("%v is not an array", x)
		}
		out := make([]string, len(list))
		for i, e := range list {
			if out[i], ok = e.(string); !ok {
				return nil, fmt.Errorf("%v is not a string", e)
			}
		}
		return out, nil
	default:
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("%v is not a string", x)
		}
		return s, nil
	}
}

// Body validates a request body (raw bytes) of a POST, PATCH or DELETE operation. An empty
// body means {}. Bytes that are not UTF-8 JSON, a body that is not an object, or a body
// that repeats a path parameter are Syntax errors; a key repeated within an object, schema
// violations, NUL characters, lone surrogates and the cross-field rules of send, reply and
// createInbox are 422 naming the field. For send and reply the server merges an
// Idempotency-Key header into the body first, since the schema requires idempotencyKey.
func (v *Validator) Body(opID string, raw []byte) error {
	bs, ok := v.body[opID]
	if !ok {
		return fmt.Errorf("schema: %q is not an operation with a request body", opID)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	if !utf8.Valid(raw) {
		return syntaxError("", "request body is not valid UTF-8")
	}
	var doc any
	if err := decodeJSON(raw, &doc); err != nil {
		return syntaxError("", "request body is not valid JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return syntaxError("", "request body must be a JSON object")
	}
	// API-NOTES section 2: a path id repeated in the body is invalid_request (400).
	for _, p := range v.src.contracts[opID].op.PathParams {
		if _, dup := obj[p]; dup {
			return syntaxError(p, "belongs in the URL path and may not be repeated in the body")
		}
	}
	// Before the schema: the decoded body holds only the last of a repeated key's values,
	// and an error about that value would mislead.
	if e := duplicateKey(raw, 0); e != nil {
		return e
	}
	if errs := bs.validate(obj, "", "field"); len(errs) > 0 {
		return errs[0]
	}
	if e := checkText(raw, obj); e != nil {
		return e
	}
	if e := crossField(opID, obj); e != nil {
		return e
	}
	return nil
}

// Path validates one path parameter value (already percent-decoded): "inboxId",
// "messageId", "threadId" or "attachmentId".
func (v *Validator) Path(name, value string) error {
	ps, ok := v.path[name]
	if !ok {
		return fmt.Errorf("schema: %q is not a path parameter", name)
	}
	if errs := ps.validate(value, name, "field"); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Response validates a 200 response body of an operation against its response schema.
// Tests use it; the message lists every problem found, not only the first.
func (v *Validator) Response(opID string, body []byte) error {
	rs, ok := v.response[opID]
	if !ok {
		return fmt.Errorf("schema: %q is not an operation", opID)
	}
	var doc any
	if err := decodeJSON(body, &doc); err != nil {
		return syntaxError("", "response body is not valid JSON: %v", err)
	}
	errs := rs.validate(doc, "", "field")
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Message
	}
	return &Error{Field: errs[0].Field, Message: strings.Join(msgs, "; ")}
}
