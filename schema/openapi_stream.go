package schema

// eventStreamResponse is the 200 response of an operation that streams Server-Sent
// Events. OpenAPI 3.1 has no keyword for the schema of each event, so the stream is a
// string and x-inboxd-event-data gives the schema of an event's data line.
func eventStreamResponse(data map[string]any) map[string]any {
	return map[string]any{
		"description": "A stream of Server-Sent Events, open until the client leaves or the key stops working. " +
			"Each event is `id: <cursor>`, `event: <type>`, `data: <payload JSON>` and a blank line; " +
			"a `: keep-alive` comment comes at least every 15 seconds. Resume with the Last-Event-ID header.",
		"content": map[string]any{"text/event-stream": map[string]any{
			"schema":              map[string]any{"type": "string"},
			"x-inboxd-event-data": data,
		}},
	}
}

// lastEventIDHeader is the header EventSource sends when it reconnects: the stream
// resumes after that event (and it wins over the lastEventId query parameter, which a
// reconnect repeats).
func lastEventIDHeader() map[string]any {
	return map[string]any{
		"name":        "Last-Event-ID",
		"in":          "header",
		"required":    false,
		"description": "Resume after this event id; sent by EventSource on reconnect. Wins over lastEventId.",
		"schema":      map[string]any{"type": "string", "pattern": "^[0-9]{1,18}$"},
	}
}
