package server

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// The end of input waits for the answers of the requests read, and only for those.
func TestAnsweredIOHoldsTheEndOfInput(t *testing.T) {
	c := qt.New(t)
	in := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":"x","method":"tools/call"}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}` + "\n"
	var out bytes.Buffer
	a := newAnsweredIO(context.Background(), strings.NewReader(in), &out)
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(a) // ReadAll stops at io.EOF and reports nil
		read <- err
	}()
	select {
	case <-read:
		t.Fatal("the end of input came before request 7 was answered")
	case <-time.After(100 * time.Millisecond):
	}
	// A server request or a notification is no answer; the answer to 7 is.
	a.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}` + "\n"))
	a.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/progress"}` + "\n"))
	select {
	case <-read:
		t.Fatal("the end of input came before request 7 was answered")
	case <-time.After(100 * time.Millisecond):
	}
	a.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}` + "\n"))
	select {
	case err := <-read:
		c.Assert(err, qt.IsNil) // request "x" was cancelled: nothing else to wait for
	case <-time.After(5 * time.Second):
		t.Fatal("the end of input did not come after the last answer")
	}
	c.Assert(strings.Count(out.String(), "\n"), qt.Equals, 3)
}
