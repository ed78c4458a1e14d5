package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inboxd/inboxd/schema"
)

// StdioConfig configures ServeMCPStdio.
type StdioConfig struct {
	BaseURL string       // the running server, e.g. http://127.0.0.1:8080
	Key     string       // the API key sent with every call (account or mailbox key)
	Version string       // reported as the server version
	Client  *http.Client // nil: a client with a 2-minute timeout
	Log     *slog.Logger // nil: no logging (stdout belongs to the protocol)
}

// ServeMCPStdio serves the same tools as POST /mcp over stdio (newline-delimited JSON-RPC
// on in and out) for desktop MCP clients, proxying every call to the server at BaseURL
// with the configured key. It lists every tool and leaves out-of-scope calls to the API
// to refuse. It returns when in is closed or ctx is done.
func ServeMCPStdio(ctx context.Context, cfg StdioConfig, in io.Reader, out io.Writer) error {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("mcp: --base-url %q is not an http or https URL", cfg.BaseURL)
	}
	if cfg.Key == "" {
		return errors.New("mcp: no API key: set INBOXD_API_KEY to an account key (bze_) or a mailbox key (gme_)")
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v, err := schema.New()
	if err != nil {
		return err
	}
	tools, err := newMCPTools(v)
	if err != nil {
		return err
	}
	tc := &toolCaller{
		schema: v,
		base:   base,
		auth:   func(*mcp.CallToolRequest) string { return "Bearer " + cfg.Key },
		do: func(r *http.Request) (int, []byte, error) {
			res, err := client.Do(r)
			if err != nil {
				return 0, nil, fmt.Errorf("cannot reach inboxd at %s: %v", base, err)
			}
			defer res.Body.Close()
			body, err := readLimited(res.Body, mcpMaxResponseBytes)
			if err != nil {
				return 0, nil, fmt.Errorf("reading the answer of %s: %v", base, err)
			}
			return res.StatusCode, body, nil
		},
		log: log,
	}
	srv := newMCPServer(cfg.Version, tools, func(schema.Operation) bool { return true }, tc)
	lw := &lockedWriter{w: out}
	rw := newAnsweredIO(ctx, &wellFormedLines{in: bufio.NewReader(in), out: lw}, lw)
	err = srv.Run(ctx, &mcp.IOTransport{Reader: rw, Writer: rw})
	if err != nil && (errors.Is(err, io.EOF) || ctx.Err() != nil) {
		return nil
	}
	return err
}
