package db_test

import (
	"fmt"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func TestThreadCandidates(t *testing.T) {
	many := make([]string, 60)
	for i := range many {
		many[i] = fmt.Sprintf("<id%d@x.test>", i)
	}
	tests := []struct {
		name      string
		refs      []string
		inReplyTo string
		want      []string
	}{{
		name:      "references then in-reply-to",
		refs:      []string{"<a@x.test>", "<b@x.test>"},
		inReplyTo: "<c@x.test>",
		want:      []string{"<a@x.test>", "<b@x.test>", "<c@x.test>"},
	}, {
		name: "nothing",
		want: []string{},
	}, {
		name:      "in-reply-to with junk around the id",
		inReplyTo: `<c@x.test> (message from "Carol" of Mon)`,
		want:      []string{"<c@x.test>"},
	}, {
		name:      "bad tokens dropped",
		refs:      []string{"<ok@x.test>", "bare@x.test", "<>", "<ctl\x01@x.test>", "<" + strings.Repeat("a", 997) + ">"},
		inReplyTo: "not-an-id",
		want:      []string{"<ok@x.test>"},
	}, {
		name: "longest allowed token kept",
		refs: []string{"<" + strings.Repeat("a", 996) + ">"},
		want: []string{"<" + strings.Repeat("a", 996) + ">"},
	}, {
		name:      "last 50 kept in order",
		refs:      many,
		inReplyTo: "<last@x.test>",
		want:      append(append([]string{}, many[11:]...), "<last@x.test>"),
	}}
	for _, test := range tests {
		qt.New(t).Run(test.name, func(c *qt.C) {
			c.Check(db.ThreadCandidates(test.refs, test.inReplyTo), qt.DeepEquals, test.want)
		})
	}
}
