package benchkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// API is a client of inboxd's HTTP API with one account key. HTTP is the caller's: its
// pool of keep-alive connections is part of what a benchmark measures.
type API struct {
	Base string // http://host:port
	Key  string
	HTTP *http.Client
}

// Do sends one request and reads the whole answer into out (if not nil); a status other
// than 200 is an error.
func (a *API) Do(ctx context.Context, method, path string, body any, out any) error {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.Base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := a.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != 200 {
		if len(b) > 300 {
			b = b[:300]
		}
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// InboxPath is the API path of the inbox with this address.
func InboxPath(addr string) string { return "/v1/inboxes/" + url.PathEscape(addr) }

// Count pages through an inbox's messages and returns how many it lists.
func (a *API) Count(ctx context.Context, inbox string) (int, error) {
	n, token := 0, ""
	for {
		var page struct {
			Messages      []json.RawMessage `json:"messages"`
			NextPageToken string            `json:"nextPageToken"`
		}
		p := InboxPath(inbox) + "/messages?limit=100"
		if token != "" {
			p += "&pageToken=" + url.QueryEscape(token)
		}
		if err := a.Do(ctx, "GET", p, nil, &page); err != nil {
			return 0, err
		}
		n += len(page.Messages)
		if page.NextPageToken == "" {
			return n, nil
		}
		token = page.NextPageToken
	}
}
