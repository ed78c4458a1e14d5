package schema

import (
	"net/url"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

func TestQueryDefaultsAndCoercion(t *testing.T) {
	v := validator(t)
	tests := []struct {
		op    string
		query string
		want  map[string]any
	}{
		{"listInboxes", "", map[string]any{"limit": 50}},
		{"listInboxes", "limit=100&pageToken=abc&group=team-a", map[string]any{"limit": 100, "pageToken": "abc", "group": "team-a"}},
		{"listInboxes", "limit=007", map[string]any{"limit": 7}},
		{"listMessages", "", map[string]any{"limit": 20}},
		{"listMessages", "labels=a&labels=b&category=billing&needsReply=uncertain&urgency=critical&pageToken=",
			map[string]any{"limit": 20, "labels": []string{"a", "b"}, "category": "billing", "needsReply": "uncertain", "urgency": "critical", "pageToken": ""}},
		{"listMessages", "labels=trash", map[string]any{"limit": 20, "labels": []string{"trash"}}},
		{"searchMessages", "query=invoice+due&limit=1", map[string]any{"limit": 1, "query": "invoice due"}},
		{"getMessage", "", map[string]any{"includeHtml": false}},
		{"getMessage", "includeHtml=true", map[string]any{"includeHtml": true}},
		{"listThreads", "", map[string]any{"limit": 20, "includeTrash": false}},
		{"listThreads", "includeTrash=true&labels=x", map[string]any{"limit": 20, "includeTrash": true, "labels": []string{"x"}}},
		{"getThread", "", map[string]any{"includeBodies": false}},
		{"getThread", "includeBodies=false", map[string]any{"includeBodies": false}},
		{"getInbox", "", map[string]any{}},
		{"getAttachment", "", map[string]any{}},
		{"getUsage", "", map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.op+"?"+tt.query, func(t *testing.T) {
			c := qt.New(t)
			q, err := url.ParseQuery(tt.query)
			c.Assert(err, qt.IsNil)
			got, err := v.Query(tt.op, q)
			c.Assert(err, qt.IsNil)
			c.Assert(got, qt.DeepEquals, tt.want)
		})
	}
}

func TestQueryRejects(t *testing.T) {
	v := validator(t)
	long := func(n int) string { return strings.Repeat("a", n) }
	labels := func(n int) string { return strings.Repeat("labels=x&", n) }
	tests := []struct {
		op    string
		query string
		want  outcome
	}{
		// limit: digits only, 1-100.
		{"listInboxes", "limit=abc", bad("limit")},
		{"listInboxes", "limit=0", bad("limit")},
		{"listInboxes", "limit=101", bad("limit")},
		{"listInboxes", "limit=1", ok},
		{"listInboxes", "limit=-1", bad("limit")},
		{"listInboxes", "limit=1.5", bad("limit")},
		{"listInboxes", "limit=%2B5", bad("limit")},
		{"listInboxes", "limit=", bad("limit")},
		{"listInboxes", "limit=99999999999999999999999", bad("limit")},
		{"listMessages", "limit=0", bad("limit")},
		{"listThreads", "limit=101", bad("limit")},
		{"searchMessages", "query=x&limit=abc", bad("limit")},
		// A scalar may not repeat: malformed, 400.
		{"listInboxes", "limit=1&limit=2", syntax("limit")},
		{"getMessage", "includeHtml=true&includeHtml=true", syntax("includeHtml")},
		{"searchMessages", "query=a&query=b", syntax("query")},
		// Unknown parameters are named.
		{"listInboxes", "foo=1", bad("foo")},
		{"getInbox", "limit=1", bad("limit")},
		{"getUsage", "verbose=true", bad("verbose")},
		{"getAttachment", "download=1", bad("download")},
		{"searchMessages", "query=x&labels=a", bad("labels")},
		{"listMessages", "includeTrash=true", bad("includeTrash")},
		// pageToken: 1-1024 for inboxes, at most 200 elsewhere.
		{"listInboxes", "pageToken=", bad("pageToken")},
		{"listInboxes", "pageToken=" + long(1024), ok},
		{"listInboxes", "pageToken=" + long(1025), bad("pageToken")},
		{"listMessages", "pageToken=" + long(200), ok},
		{"listMessages", "pageToken=" + long(201), bad("pageToken")},
		{"listThreads", "pageToken=" + long(201), bad("pageToken")},
		// group.
		{"listInboxes", "group=", bad("group")},
		{"listInboxes", "group=Team", bad("group")},
		{"listInboxes", "group=-team", bad("group")},
		{"listInboxes", "group=" + long(64), ok},
		{"listInboxes", "group=" + long(65), bad("group")},
		// Triage filters.
		{"listMessages", "category=spam", bad("category")},
		{"listMessages", "category=notification", ok},
		{"listMessages", "needsReply=maybe", bad("needsReply")},
		{"listMessages", "needsReply=true", bad("needsReply")},
		{"listThreads", "urgency=urgent", bad("urgency")},
		{"searchMessages", "query=x&urgency=low", ok},
		// labels: at most 50 of 1-64 characters.
		{"listMessages", labels(50), ok},
		{"listMessages", labels(51), bad("labels")},
		{"listMessages", "labels=a&labels=", bad("labels[1]")},
		{"listThreads", "labels=" + long(65), bad("labels[0]")},
		{"listThreads", "labels=" + long(64), ok},
		// query: required, 1-1000.
		{"searchMessages", "", bad("query")},
		{"searchMessages", "query=", bad("query")},
		{"searchMessages", "query=" + long(1000), ok},
		{"searchMessages", "query=" + long(1001), bad("query")},
		// Booleans are exactly true or false.
		{"getMessage", "includeHtml=1", bad("includeHtml")},
		{"getMessage", "includeHtml=TRUE", bad("includeHtml")},
		{"getMessage", "includeHtml=", bad("includeHtml")},
		{"listThreads", "includeTrash=yes", bad("includeTrash")},
		{"getThread", "includeBodies=no", bad("includeBodies")},
		// Text values: no NUL, valid UTF-8.
		{"searchMessages", "query=a%00b", bad("query")},
		{"searchMessages", "query=%FF", bad("query")},
		{"searchMessages", "query=caf%C3%A9", ok},
	}
	for _, tt := range tests {
		t.Run(tt.op+"?"+tt.query[:min(len(tt.query), 40)], func(t *testing.T) {
			c := qt.New(t)
			q, err := url.ParseQuery(tt.query)
			c.Assert(err, qt.IsNil)
			got, err := v.Query(tt.op, q)
			assertOutcome(c, err, tt.want)
			if tt.want != ok {
				c.Check(got, qt.IsNil)
			}
		})
	}
}

func TestQueryMessages(t *testing.T) {
	v := validator(t)
	tests := []struct {
		op, query, want string
	}{
		{"listInboxes", "limit=abc", "limit: must be an integer from 1 to 100"},
		{"listInboxes", "limit=0", "limit: must be an integer from 1 to 100"},
		{"listInboxes", "foo=1", "foo: is not a known query parameter of listInboxes"},
		{"listInboxes", "limit=1&limit=2", "limit: may be given only once"},
		{"listMessages", "category=spam", "category: must be one of billing, support, sales, personal, notification, other"},
		{"getMessage", "includeHtml=1", "includeHtml: must be true or false"},
		{"searchMessages", "", "query: is required"},
		{"searchMessages", "query=", "query: must be a search query of 1-1000 characters"},
		{"listInboxes", "group=Team", "group: must be a group name of 1-64 characters from a-z, 0-9, _ and -, starting with a letter or digit"},
		{"listMessages", strings.Repeat("labels=x&", 51), "labels: must have at most 50 items"},
	}
	for _, tt := range tests {
		q, err := url.ParseQuery(tt.query)
		qt.Assert(t, err, qt.IsNil)
		_, err = v.Query(tt.op, q)
		qt.Check(t, err, qt.ErrorMatches, `\Q`+tt.want+`\E`)
	}
}

func TestQueryOnlyForGET(t *testing.T) {
	c := qt.New(t)
	v := validator(t)
	for _, op := range []string{"send", "createInbox", "deleteInbox", "nosuchOp"} {
		_, err := v.Query(op, url.Values{})
		c.Assert(err, qt.Not(qt.IsNil))
		var e *Error
		c.Check(err, qt.Not(qt.ErrorAs), &e, qt.Commentf("a programming error, not a client error: %v", err))
	}
}
