package schema

import (
	"errors"
	"sync"
	"testing"

	qt "github.com/frankban/quicktest"
)

// testValidator compiles the schemas once for the whole test binary; New's own cost is
// covered by TestNew.
var testValidator = sync.OnceValues(New)

func validator(t *testing.T) *Validator {
	t.Helper()
	v, err := testValidator()
	qt.Assert(t, err, qt.IsNil)
	return v
}

// outcome is what a test expects of a validation: ok, or an *Error naming field.
type outcome struct {
	field  string // "" with syntax false means valid
	syntax bool
}

var ok = outcome{}

func bad(field string) outcome    { return outcome{field: field} }
func syntax(field string) outcome { return outcome{field: field, syntax: true} }

// assertOutcome checks err against want: nil for ok, otherwise an *Error with the field, the
// Syntax flag, and a message that starts with the field's name as the spec requires.
func assertOutcome(c *qt.C, err error, want outcome) {
	c.Helper()
	if want == ok {
		c.Assert(err, qt.IsNil)
		return
	}
	var e *Error
	c.Assert(errors.As(err, &e), qt.IsTrue, qt.Commentf("want *Error naming %q, got %v", want.field, err))
	c.Check(e.Field, qt.Equals, want.field, qt.Commentf("message: %s", e.Message))
	c.Check(e.Syntax, qt.Equals, want.syntax, qt.Commentf("message: %s", e.Message))
	if want.field != "" {
		c.Check(e.Message, qt.Matches, `\Q`+want.field+`\E: .+`)
	}
	c.Check(e.Error(), qt.Equals, e.Message)
}
