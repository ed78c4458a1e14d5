// Command searchbench measures search: it fills a database with realistic mail, times
// reindexing, and times searches over HTTP. scripts/bench-search.sh runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
)

func main() {
	n := flag.Int("n", 100000, "messages")
	dir := flag.String("dir", os.TempDir(), "work directory")
	mode := flag.String("mode", "http", "gen (fill a database), http (time searches over HTTP), size (index vs bodies), direct (index only, no store)")
	dbPath := flag.String("db", "", "database file (gen, http, size)")
	perKind := flag.Int("queries", 300, "queries of each kind (http)")
	prof := flag.String("cpuprofile", "", "write a CPU profile")
	flag.Parse()
	if *prof != "" {
		f, _ := os.Create(*prof)
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	var err error
	switch *mode {
	case "direct":
		err = runDirect(*n, *dir)
	case "gen":
		err = runGen(ctx, *n, *dbPath)
	case "http":
		err = runHTTP(ctx, *dbPath, *perKind)
	case "size":
		err = runSize(ctx, *dbPath)
	default:
		err = fmt.Errorf("unknown mode %q", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "searchbench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// queries returns realistic query sets: words a person would search for (mid-frequency
// vocabulary, not function words), pairs of them, random phrases of 2-3 words of the
// vocabulary (rphrase: most are in no message, the worst case for a phrase check), sender
// names, and very common words. Phrases cut from real bodies come from bodyPhrases.
func (c *corpus) queries(n int) map[string][]string {
	out := map[string][]string{}
	content := c.Vocab[60:3000]
	for i := 0; i < n; i++ {
		out["one"] = append(out["one"], content[c.Rng.IntN(len(content))])
		out["two"] = append(out["two"], content[c.Rng.IntN(len(content))]+" "+content[c.Rng.IntN(len(content))])
		s := strings.Fields(strings.TrimSuffix(c.Sentence(), "."))
		j := c.Rng.IntN(len(s) - 2)
		out["rphrase"] = append(out["rphrase"], `"`+strings.ToLower(strings.Join(s[j:j+2+c.Rng.IntN(2)], " "))+`"`)
		out["from"] = append(out["from"], "from:"+strings.Fields(c.Senders[c.Rng.IntN(len(c.Senders))].Name)[1])
		out["common"] = append(out["common"], c.Vocab[c.Rng.IntN(60)])
	}
	return out
}
