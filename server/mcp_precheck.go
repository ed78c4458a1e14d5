package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/inboxd/inboxd/schema"
)

// The MCP SDK answers a body it cannot take as a JSON-RPC message with a plain-text 400
// (and a wrong Content-Type with a plain-text 415), which a JSON-RPC client cannot read.
// jsonRPCProblem finds those bodies first, so they get JSON answers: the API's error
// shape for the Content-Type, and a JSON-RPC error response (id null, HTTP 400) for the
// message itself, -32700 when it is not JSON, -32600 when it is not a JSON-RPC 2.0
// request, notification or response, or repeats a member of its own or of its params (a
// tool's arguments are checked by the tool, as a REST body is).
func jsonRPCProblem(body []byte) (code int, message string) {
	if len(bytes.TrimSpace(body)) == 0 {
		return -32700, "Parse error: the body is empty"
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		var anything any
		if json.Unmarshal(body, &anything) != nil {
			return -32700, "Parse error: the body is not JSON"
		}
		return -32600, "Invalid Request: the body must be one JSON-RPC message, an object"
	}
	if err := schema.DuplicateKey(body, 2); err != nil {
		return -32600, "Invalid Request: " + err.Error()
	}
	var version string
	if json.Unmarshal(msg["jsonrpc"], &version) != nil || version != "2.0" {
		return -32600, `Invalid Request: "jsonrpc" must be "2.0"`
	}
	if raw, ok := msg["method"]; ok {
		var method string
		if json.Unmarshal(raw, &method) != nil {
			return -32600, `Invalid Request: "method" must be a string`
		}
	}
	if raw, ok := msg["id"]; ok {
		var id any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&id) != nil {
			return -32600, `Invalid Request: "id" must be a string or a number`
		}
		switch id.(type) {
		case string, json.Number:
		default:
			return -32600, `Invalid Request: "id" must be a string or a number`
		}
	}
	return 0, ""
}

// writeJSONRPCError answers with a JSON-RPC error response that no request id can be
// given to.
func writeJSONRPCError(w http.ResponseWriter, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": code, "message": message},
	})
}
