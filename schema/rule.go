package schema

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"unicode/utf8"
)

// stringRule is a string definition of json/defs.json compiled for Go callers, so the
// checks made outside request bodies (recipients, inbox ids, fixture labels) and the JSON
// Schemas share one pattern and one set of bounds.
type stringRule struct {
	re       *regexp.Regexp
	min, max int    // in characters
	desc     string // completes "must be ..."
}

func (r stringRule) valid(s string) bool {
	n := utf8.RuneCountInString(s)
	return n >= r.min && n <= r.max && r.re.MatchString(s)
}

// defRule compiles definition name of json/defs.json, which must have a pattern and a
// maxLength.
func defRule(name string) stringRule {
	defs, err := readJSON("json/defs.json")
	if err != nil {
		panic(err) // the file is embedded: the tests prove it parses
	}
	def, _ := defs[name].(map[string]any)
	pattern, _ := def["pattern"].(string)
	r := stringRule{re: regexp.MustCompile(pattern)}
	r.desc, _ = def["description"].(string)
	if r.max, err = strconv.Atoi(fmt.Sprint(def["maxLength"])); err != nil {
		panic("schema: defs.json " + name + " has no maxLength")
	}
	if m, ok := def["minLength"]; ok {
		r.min, _ = strconv.Atoi(fmt.Sprint(m))
	}
	return r
}

var (
	emailRule = sync.OnceValue(func() stringRule { return defRule("email") })
	labelRule = sync.OnceValue(func() stringRule { return defRule("label") })
)

// ValidEmail reports whether s is an address the service accepts (used for inboxId and
// recipients): at most 254 characters, no leading, trailing or consecutive dots in the local
// part, and a domain with a dotted label and a top-level domain of 2+ letters. Letters may
// be of either case; the server lowercases addresses.
func ValidEmail(s string) bool { return emailRule().valid(s) }

// ValidLabel reports whether s is a label the API accepts: 1-64 characters, none of them a
// control character.
func ValidLabel(s string) bool { return labelRule().valid(s) }

// LabelRule says what a valid label is, to complete "must be ...".
func LabelRule() string { return labelRule().desc }
