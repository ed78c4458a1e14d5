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

// eventWebhooks is the document's webhooks (OpenAPI 3.1): what inboxd posts to a
// webhook's URL (extensions section 3), the same Event the stream's data lines carry
// (event is its schema as the document names it), signed in the headers both the
// Standard Webhooks and the Svix libraries verify.
func eventWebhooks(event any) map[string]any {
	header := func(name, desc string) map[string]any {
		return map[string]any{"name": name, "in": "header", "required": true, "description": desc, "schema": map[string]any{"type": "string"}}
	}
	var params []any
	for _, prefix := range []string{"webhook", "svix"} {
		params = append(params,
			header(prefix+"-id", "The event's eventId: a retried delivery repeats it, so receivers dedupe on it."),
			header(prefix+"-timestamp", "Unix seconds of this attempt."),
			header(prefix+"-signature", "v1, then the base64 HMAC-SHA256 of <id>.<timestamp>.<body> keyed with the secret's decoded bytes."))
	}
	return map[string]any{"event": map[string]any{"post": map[string]any{
		"operationId": "eventWebhook",
		"summary":     "An event of the webhook's inboxes and types, posted to its URL; any 2xx within 10 s is success, anything else is retried for 24 hours.",
		"tags":        []any{"inboxd"}, "x-inboxd-extension": true,
		"security":    []any{},
		"parameters":  params,
		"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": event}}},
		"responses": map[string]any{
			"2XX":     map[string]any{"description": "Received; the delivery succeeded."},
			"default": map[string]any{"description": "Any other answer, or none within 10 s, fails the attempt; it is retried."},
		},
	}}}
}
