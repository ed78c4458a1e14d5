package schema

import (
	"testing"

	qt "github.com/frankban/quicktest"
)

// TestToolInputSchema checks that each tool's input schema is its operation's path
// parameters plus exactly the REST query or body properties, with nothing else accepted.
func TestToolInputSchema(t *testing.T) {
	c := qt.New(t)
	v := validator(t)
	for _, op := range Operations() {
		s, err := v.ToolInputSchema(op.ID)
		c.Assert(err, qt.IsNil)
		c.Assert(s["type"], qt.Equals, "object")
		c.Assert(s["additionalProperties"], qt.Equals, false)
		input := v.src.contracts[op.ID].body
		if op.Method == "GET" {
			input = v.src.contracts[op.ID].query
		}
		props := s["properties"].(map[string]any)
		inProps := input["properties"].(map[string]any)
		c.Assert(len(props), qt.Equals, len(op.PathParams)+len(inProps), qt.Commentf("%s", op.ID))
		for name, p := range inProps {
			c.Assert(props[name], qt.DeepEquals, p, qt.Commentf("%s.%s", op.ID, name))
		}
		required := stringList(s["required"])
		for i, p := range op.PathParams {
			c.Assert(required[i], qt.Equals, p)
			c.Assert(props[p].(map[string]any)["description"], qt.Equals, toolParamDescriptions[p])
		}
		c.Assert(required[len(op.PathParams):], qt.DeepEquals, stringList(input["required"]))
	}
	_, err := v.ToolInputSchema("nope")
	c.Assert(err, qt.ErrorMatches, `.*not an operation`)

	// Each call returns a fresh copy.
	s, _ := v.ToolInputSchema("send")
	s["properties"].(map[string]any)["to"].(map[string]any)["maxItems"] = 1
	s2, _ := v.ToolInputSchema("send")
	c.Assert(s2["properties"].(map[string]any)["to"].(map[string]any)["maxItems"], qt.Not(qt.Equals), 1)
	c.Assert(v.src.path["inboxId"]["description"], qt.Not(qt.Equals), toolParamDescriptions["inboxId"])
}
