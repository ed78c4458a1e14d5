package server

import (
	"net/http"
	"strconv"
	"sync"

	// encoding/json's output, with codecs cached per type: responses are the hot path.
	json "github.com/segmentio/encoding/json"
)

// writeJSON encodes v into a buffer first, so an encoding failure can still become a
// clean error instead of a half-written 200.
func writeJSON(w http.ResponseWriter, status int, v any) {
	bp := jsonBuffers.Get().(*[]byte)
	defer jsonBuffers.Put(bp)
	// As json.Encoder with SetEscapeHTML(false) writes it: sorted map keys, a newline.
	buf, err := json.Append((*bp)[:0], v, json.SortMapKeys)
	if err != nil {
		buf = append(buf[:0], `{"error":{"code":"internal_error","message":"internal error","transient":true}}`...)
		status = http.StatusInternalServerError
	}
	buf = append(buf, '\n')
	if cap(buf) <= maxPooledBuffer {
		*bp = buf
	}
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Cache-Control"] = noStore
	h["Content-Length"] = []string{strconv.Itoa(len(buf))}
	w.WriteHeader(status)
	w.Write(buf)
}

// Response buffers are reused; one that grew past maxPooledBuffer (a large thread) is
// left to the garbage collector.
const maxPooledBuffer = 256 << 10

var jsonBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Header values shared by every JSON response (net/http only reads them).
var (
	contentTypeJSON = []string{"application/json"}
	noStore         = []string{"no-store"}
)
