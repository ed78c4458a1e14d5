package sqlite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// A LIMIT bound as a plain ? makes SQLite prepare the statement again at every use
// (store.go, Open): the store's statements bind it as +?. Equalities in joined or ordered
// statements follow the same rule but cannot be told apart by a pattern; this catches
// the common case.
func TestNoStatementLimitsByAPlainParameter(t *testing.T) {
	files, err := filepath.Glob("*.go")
	qt.Assert(t, err, qt.IsNil)
	plain := regexp.MustCompile(`(?i)\b(LIMIT|OFFSET) \?`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		qt.Assert(t, err, qt.IsNil)
		for _, m := range plain.FindAllIndex(src, -1) {
			t.Errorf("%s: %q binds its limit as a plain ?; write +?", f, src[m[0]:m[1]+2])
		}
	}
}
