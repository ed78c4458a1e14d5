package schema

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"unicode/utf8"
)

// emailRule is the "email" definition of json/defs.json compiled for ValidEmail, so the
// server's checks of recipients and inbox ids and the JSON Schemas share one pattern.
var emailRule = sync.OnceValues(func() (*regexp.Regexp, int) {
	defs, err := readJSON("json/defs.json")
	if err != nil {
		panic(err) // the file is embedded: the tests prove it parses
	}
	def, _ := defs["email"].(map[string]any)
	pattern, _ := def["pattern"].(string)
	maxLen, err := strconv.Atoi(fmt.Sprint(def["maxLength"]))
	if err != nil {
		panic("schema: defs.json email has no maxLength")
	}
	return regexp.MustCompile(pattern), maxLen
})

// ValidEmail reports whether s is an address the service accepts (used for inboxId and
// recipients): at most 254 characters, no leading, trailing or consecutive dots in the local
// part, and a domain with a dotted label and a top-level domain of 2+ letters. Letters may
// be of either case; the server lowercases addresses.
func ValidEmail(s string) bool {
	re, maxLen := emailRule()
	return utf8.RuneCountInString(s) <= maxLen && re.MatchString(s)
}
