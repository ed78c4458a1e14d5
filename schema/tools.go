package schema

import "fmt"

// toolParamDescriptions describe the path parameters as MCP tool arguments. Unlike in the
// OpenAPI document they are plain values: the tool call percent-encodes them into the path.
var toolParamDescriptions = map[string]string{
	"inboxId":      "The inbox's email address as returned in inboxId, e.g. support@example.com (not URL-encoded).",
	"messageId":    "The message's RFC 5322 Message-ID as returned in messageId, angle brackets included (not URL-encoded).",
	"threadId":     "The thread's UUID as returned in threadId.",
	"attachmentId": "The attachment's UUID as returned in the message's attachments.",
}

// ToolInputSchema returns the JSON Schema of the arguments of an operation's MCP tool
// (API-NOTES section 13). It is composed from the same maps that Query, Body and Path
// validate with: the path parameters become ordinary properties, all required, followed
// by the properties and the required list of the operation's query (GET) or body schema,
// defaults included; additionalProperties is false. The result is a fresh copy that the
// caller may keep or change.
func (v *Validator) ToolInputSchema(opID string) (map[string]any, error) {
	c, ok := v.src.contracts[opID]
	if !ok {
		return nil, fmt.Errorf("schema: %q is not an operation", opID)
	}
	input := c.body
	if c.op.Method == "GET" {
		input = c.query
	}
	props := map[string]any{}
	required := []any{}
	for _, name := range c.op.PathParams {
		p, _ := deepCopy(v.src.path[name]).(map[string]any)
		p["description"] = toolParamDescriptions[name]
		props[name] = p
		required = append(required, name)
	}
	inProps, _ := input["properties"].(map[string]any)
	for _, name := range sortedKeys(inProps) {
		if _, dup := props[name]; dup {
			return nil, fmt.Errorf("schema: %s: %q is both a path parameter and an input property", opID, name)
		}
		props[name] = deepCopy(inProps[name])
	}
	for _, name := range stringList(input["required"]) {
		required = append(required, name)
	}
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s, nil
}
