package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// writeJSON encodes v into a buffer first, so an encoding failure can still become a
// clean error instead of a half-written 200.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal_error","message":"internal error","transient":true}}` + "\n")
		status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
