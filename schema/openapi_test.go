package schema

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	b, err := validator(t).OpenAPI("https://mail.example.com")
	qt.Assert(t, err, qt.IsNil)
	var doc map[string]any
	qt.Assert(t, json.Unmarshal(b, &doc), qt.IsNil)
	return doc
}

// deref follows a schema's $ref into the document's components.schemas.
func deref(doc map[string]any, schema any) map[string]any {
	s := schema.(map[string]any)
	for {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		s = doc["components"].(map[string]any)["schemas"].(map[string]any)[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
}

func TestOpenAPITopLevel(t *testing.T) {
	c := qt.New(t)
	doc := openAPIDoc(t)
	c.Check(doc["openapi"], qt.Equals, "3.1.0")
	info := doc["info"].(map[string]any)
	c.Check(info["title"], qt.Equals, "inboxd")
	c.Check(info["version"], qt.Equals, "1.0.0")
	c.Check(info["description"], qt.Contains, "idempotencyKey")
	c.Check(info["description"], qt.Contains, "sizes and recipients")
	c.Check(doc["servers"], qt.DeepEquals, []any{map[string]any{"url": "https://mail.example.com"}})
	c.Check(info["license"], qt.DeepEquals, map[string]any{"name": "MIT", "identifier": "MIT"})
	comps := doc["components"].(map[string]any)
	schemas := comps["schemas"].(map[string]any)
	for _, name := range []string{"Inbox", "Message", "Thread", "Triage", "Protection", "Delivery", "AttachmentSummary", "Usage", "Error", "SendResult", "Webhook"} {
		c.Check(schemas[name], qt.Not(qt.IsNil), qt.Commentf("components.schemas lacks %s", name))
	}
	c.Check(schemas["Uuid"], qt.IsNil) // scalars are written out where they are used
	c.Check(comps["responses"].(map[string]any)["Error404"], qt.Not(qt.IsNil))
	bearer := comps["securitySchemes"].(map[string]any)["bearerAuth"].(map[string]any)
	c.Check(bearer["type"], qt.Equals, "http")
	c.Check(bearer["scheme"], qt.Equals, "bearer")
	c.Check(bearer["description"], qt.Contains, "bze_")
	c.Check(bearer["description"], qt.Contains, "gme_")
}

func TestOpenAPIOperations(t *testing.T) {
	c := qt.New(t)
	doc := openAPIDoc(t)
	paths := doc["paths"].(map[string]any)
	count := 0
	for _, item := range paths {
		count += len(item.(map[string]any))
	}
	c.Assert(count, qt.Equals, len(Operations()))

	for _, op := range Operations() {
		c.Run(op.ID, func(c *qt.C) {
			item, _ := paths[op.Path].(map[string]any)
			c.Assert(item, qt.Not(qt.IsNil), qt.Commentf("no path %s", op.Path))
			o, _ := item[strings.ToLower(op.Method)].(map[string]any)
			c.Assert(o, qt.Not(qt.IsNil))
			c.Check(o["operationId"], qt.Equals, op.ID)
			c.Check(o["summary"], qt.Equals, op.Summary)
			if op.Control { // no key: served only with serve --test-controls
				c.Check(o["x-required-scope"], qt.IsNil)
				c.Check(o["security"], qt.DeepEquals, []any{})
				c.Check(o["tags"], qt.DeepEquals, []any{"inboxd"})
				return
			}
			c.Check(o["x-required-scope"], qt.Equals, op.Scope)
			c.Check(o["security"], qt.DeepEquals, []any{map[string]any{"bearerAuth": []any{}}})

			// Parameters: the path parameters, required, then for GET the query ones.
			params := o["parameters"].([]any)
			var pathNames, queryNames []string
			for _, p := range params {
				p := p.(map[string]any)
				c.Check(p["schema"], qt.Not(qt.IsNil))
				switch p["in"] {
				case "path":
					c.Check(p["required"], qt.IsTrue)
					pathNames = append(pathNames, p["name"].(string))
				case "query":
					queryNames = append(queryNames, p["name"].(string))
				case "header":
					c.Check(op.EventStream && p["name"] == "Last-Event-ID", qt.IsTrue, qt.Commentf("header %v", p["name"]))
				default:
					c.Errorf("parameter %v in %v", p["name"], p["in"])
				}
			}
			c.Check(pathNames, qt.DeepEquals, op.PathParams)
			if op.Method != "GET" {
				c.Check(queryNames, qt.HasLen, 0)
			}

			// requestBody only for POST and PATCH.
			rb, hasBody := o["requestBody"].(map[string]any)
			c.Check(hasBody, qt.Equals, op.Method == "POST" || op.Method == "PATCH" || op.Method == "PUT")
			if hasBody {
				schema := deref(doc, rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"])
				c.Check(schema["type"], qt.Equals, "object")
				c.Check(schema["additionalProperties"], qt.Equals, false)
			}

			// responses: 200, default (the error schema) and each error status the
			// operation answers, which every operation has a few of.
			responses := o["responses"].(map[string]any)
			for _, status := range []string{"400", "422", "500", "503"} {
				c.Check(responses[status], qt.DeepEquals, map[string]any{"$ref": "#/components/responses/Error" + status})
			}
			if !op.Control {
				c.Check(responses["401"], qt.Not(qt.IsNil))
			}
			content := responses["200"].(map[string]any)["content"].(map[string]any)
			if op.EventStream {
				c.Check(content["text/event-stream"].(map[string]any)["schema"], qt.DeepEquals, map[string]any{"type": "string"})
				data := content["text/event-stream"].(map[string]any)["x-inboxd-event-data"].(map[string]any)
				c.Check(data, qt.DeepEquals, map[string]any{"$ref": "#/components/schemas/Event"})
				c.Check(content["application/json"], qt.IsNil)
				return
			}
			ok := content["application/json"].(map[string]any)["schema"].(map[string]any)
			if op.ID == "updateMessageLabels" || op.ID == "updateThreadLabels" {
				c.Check(ok, qt.DeepEquals, map[string]any{"type": "null"})
			} else {
				c.Check(ok["$schema"], qt.Equals, "https://json-schema.org/draft/2020-12/schema")
			}
			errSchema := deref(doc, responses["default"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"])
			c.Check(errSchema["required"], qt.DeepEquals, []any{"error"})
			inner := errSchema["properties"].(map[string]any)["error"].(map[string]any)
			c.Check(inner["required"], qt.DeepEquals, []any{"code", "message", "transient"})
		})
	}
}

func TestOpenAPIDetails(t *testing.T) {
	c := qt.New(t)
	doc := openAPIDoc(t)
	paths := doc["paths"].(map[string]any)
	op := func(path, method string) map[string]any {
		return paths[path].(map[string]any)[method].(map[string]any)
	}
	param := func(o map[string]any, name string) map[string]any {
		for _, p := range o["parameters"].([]any) {
			if p.(map[string]any)["name"] == name {
				return p.(map[string]any)
			}
		}
		return nil
	}

	// getUsage: an explicit empty parameter list and no body.
	usage := op("/v1/usage", "get")
	c.Check(usage["parameters"], qt.DeepEquals, []any{})
	c.Check(usage["requestBody"], qt.IsNil)

	// Query parameters carry the validation schema, defaults and required flags.
	list := op("/v1/inboxes", "get")
	limit := param(list, "limit")
	c.Check(limit["in"], qt.Equals, "query")
	c.Check(limit["required"], qt.IsFalse)
	c.Check(limit["schema"], qt.DeepEquals, map[string]any{"type": "integer", "minimum": 1.0, "maximum": 100.0, "default": 50.0})
	c.Check(param(op("/v1/inboxes/{inboxId}/messages", "get"), "limit")["schema"].(map[string]any)["default"], qt.Equals, 20.0)
	search := op("/v1/inboxes/{inboxId}/messages/search", "get")
	c.Check(param(search, "query")["required"], qt.IsTrue)
	c.Check(param(search, "labels"), qt.IsNil)
	labels := param(op("/v1/inboxes/{inboxId}/threads", "get"), "labels")
	c.Check(labels["explode"], qt.IsTrue)
	c.Check(labels["schema"].(map[string]any)["maxItems"], qt.Equals, 50.0)
	c.Check(param(op("/v1/inboxes/{inboxId}/threads", "get"), "includeTrash")["schema"], qt.DeepEquals, map[string]any{"type": "boolean", "default": false})
	c.Check(param(op("/v1/inboxes/{inboxId}/messages/{messageId}", "get"), "includeHtml"), qt.Not(qt.IsNil))
	c.Check(param(op("/v1/inboxes/{inboxId}/threads/{threadId}", "get"), "includeBodies"), qt.Not(qt.IsNil))

	// Path parameter schemas.
	inboxID := param(op("/v1/inboxes/{inboxId}", "get"), "inboxId")["schema"].(map[string]any)
	c.Check(inboxID["maxLength"], qt.Equals, 254.0)
	c.Check(inboxID["pattern"], qt.Not(qt.IsNil))
	threadID := param(op("/v1/inboxes/{inboxId}/threads/{threadId}", "get"), "threadId")["schema"].(map[string]any)
	c.Check(threadID["pattern"], qt.Contains, "[1-8]")

	// requestBody.required only when some body field is required.
	required := func(path, method string) any {
		return op(path, method)["requestBody"].(map[string]any)["required"]
	}
	c.Check(required("/v1/inboxes", "post"), qt.IsTrue)
	c.Check(required("/v1/inboxes/{inboxId}", "patch"), qt.IsTrue)
	c.Check(required("/v1/inboxes/{inboxId}/setup", "post"), qt.IsFalse)
	c.Check(required("/v1/inboxes/{inboxId}/messages/send", "post"), qt.IsTrue)
	c.Check(required("/v1/inboxes/{inboxId}/messages/{messageId}/reply", "post"), qt.IsTrue)
	c.Check(required("/v1/inboxes/{inboxId}/messages/{messageId}/labels", "patch"), qt.IsFalse)
	c.Check(required("/v1/inboxes/{inboxId}/threads/{threadId}/labels", "patch"), qt.IsFalse)
	c.Check(op("/v1/inboxes/{inboxId}", "delete")["requestBody"], qt.IsNil)

	send := op("/v1/inboxes/{inboxId}/messages/send", "post")["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	c.Check(send["required"], qt.DeepEquals, []any{"to", "idempotencyKey"})
	setup := op("/v1/inboxes/{inboxId}/setup", "post")["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	c.Check(setup, qt.DeepEquals, map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{}})

	// Triage and protection times: format date-time plus a pattern.
	msg := deref(doc, op("/v1/inboxes/{inboxId}/messages/{messageId}", "get")["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"])
	props := msg["properties"].(map[string]any)
	branches := deref(doc, props["triage"])["oneOf"].([]any)
	c.Assert(branches, qt.HasLen, 3)
	analyzedAt := branches[2].(map[string]any)["properties"].(map[string]any)["analyzedAt"].(map[string]any)
	c.Check(analyzedAt["format"], qt.Equals, "date-time")
	c.Check(analyzedAt["pattern"], qt.Matches, `.*Z\$`)
	scannedAt := deref(doc, props["protection"])["properties"].(map[string]any)["scannedAt"].(map[string]any)
	c.Check(scannedAt["format"], qt.Equals, "date-time")
	c.Check(scannedAt["pattern"], qt.Not(qt.IsNil))
}

// Every reference of the document points into it (no defs.json file left), and every
// named schema and response is used.
func TestOpenAPIIsSelfContained(t *testing.T) {
	b, err := validator(t).OpenAPI("http://localhost:8080")
	qt.Assert(t, err, qt.IsNil)
	var doc map[string]any
	qt.Assert(t, json.Unmarshal(b, &doc), qt.IsNil)
	comps := doc["components"].(map[string]any)
	used := map[string]bool{}
	for _, ref := range regexp.MustCompile(`"\$ref":"([^"]*)"`).FindAllSubmatch(b, -1) {
		name := string(ref[1])
		used[name] = true
		kind, item, ok := strings.Cut(strings.TrimPrefix(name, "#/components/"), "/")
		qt.Assert(t, ok && strings.HasPrefix(name, "#/components/"), qt.IsTrue, qt.Commentf("%s", name))
		qt.Check(t, comps[kind].(map[string]any)[item], qt.Not(qt.IsNil), qt.Commentf("%s", name))
	}
	for _, kind := range []string{"schemas", "responses"} {
		for item := range comps[kind].(map[string]any) {
			qt.Check(t, used["#/components/"+kind+"/"+item], qt.IsTrue, qt.Commentf("%s/%s is not used", kind, item))
		}
	}
	qt.Check(t, bytes.Contains(b, []byte(`"$comment"`)), qt.IsFalse)
	qt.Check(t, bytes.Contains(b, []byte(`\u0026`)), qt.IsFalse, qt.Commentf("patterns should stay readable"))
}

// OpenAPI must not change the schemas the validator uses (it adds $schema to copies), and
// two calls give the same bytes.
func TestOpenAPIIsStable(t *testing.T) {
	c := qt.New(t)
	v := validator(t)
	a, err := v.OpenAPI("http://a")
	c.Assert(err, qt.IsNil)
	b, err := v.OpenAPI("http://a")
	c.Assert(err, qt.IsNil)
	c.Check(string(a), qt.Equals, string(b))
	a[0] = 'X' // the caller's copy
	b, _ = v.OpenAPI("http://a")
	c.Check(b[0], qt.Equals, byte('{'))
	other, _ := v.OpenAPI("http://b")
	c.Check(string(other), qt.Contains, `"servers":[{"url":"http://b"}]`)
	for id, ct := range v.src.contracts {
		c.Check(ct.response["$schema"], qt.IsNil, qt.Commentf(id))
	}
}

// A webhook's body is the event the stream's data lines carry (extensions sections 1
// and 3): one named schema serves both, its message typed by the shapes of each type.
func TestOpenAPIWebhookBodyIsTheEvent(t *testing.T) {
	c := qt.New(t)
	doc := openAPIDoc(t)
	post := doc["webhooks"].(map[string]any)["event"].(map[string]any)["post"].(map[string]any)
	body := post["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"]
	c.Check(body, qt.DeepEquals, map[string]any{"$ref": "#/components/schemas/Event"})
	var headers []any
	for _, p := range post["parameters"].([]any) {
		headers = append(headers, p.(map[string]any)["name"])
	}
	c.Check(headers, qt.DeepEquals, []any{"webhook-id", "webhook-timestamp", "webhook-signature", "svix-id", "svix-timestamp", "svix-signature"})
	message := deref(doc, deref(doc, body)["properties"].(map[string]any)["message"])
	var shapes []any
	for _, s := range message["anyOf"].([]any) {
		shapes = append(shapes, s.(map[string]any)["$ref"])
	}
	c.Check(shapes, qt.DeepEquals, []any{"#/components/schemas/EventMessageWithText", "#/components/schemas/EventMessageSummary",
		"#/components/schemas/EventMessageRef", "#/components/schemas/EventMessageLabels"})
}
