// Command eval measures the built-in triage model on the held-out split of the corpus:
// accuracy of each head with a confusion matrix, calibration, simple baselines, and the
// speed and memory of classification on one core. scripts/triage-eval.sh runs it.
//
//	go run ./mail/triage/eval [-corpus fixtures/triage/corpus.jsonl] [-model FILE] [-unseen]
//
// -unseen adds a harder figure: the scenarios (kinds of mail) are split into five groups,
// and each group's held-out messages are scored by a model trained without any message of
// that group, so it has never seen that kind of mail.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail/triage"
)

func main() {
	corpus := flag.String("corpus", "fixtures/triage/corpus.jsonl", "labelled corpus (JSON lines)")
	modelFile := flag.String("model", "", "model file (default: the model embedded in the binary)")
	unseen := flag.Bool("unseen", false, "also score kinds of mail the model never saw (retrains five models)")
	hand := flag.String("handwritten", "fixtures/triage/handwritten.jsonl", "hand-written messages, not from the generator, scored separately (\"\" to skip)")
	speedFor := flag.Duration("speed", 3*time.Second, "how long to measure throughput")
	flag.Parse()
	if err := run(*corpus, *modelFile, *hand, *unseen, *speedFor); err != nil {
		fmt.Fprintln(os.Stderr, "eval:", err)
		os.Exit(1)
	}
}

func run(corpus, modelFile, hand string, unseen bool, speedFor time.Duration) error {
	runtime.GOMAXPROCS(1) // the speed target is for one core
	rssBefore := rssKB("VmRSS:")
	var b *triage.Builtin
	var err error
	if modelFile != "" {
		raw, err := os.ReadFile(modelFile)
		if err != nil {
			return err
		}
		m, err := triage.LoadModel(raw)
		if err != nil {
			return err
		}
		b = triage.NewBuiltinModel(m)
	} else if b, err = triage.NewBuiltin(); err != nil {
		return err
	}
	runtime.GC()
	debug.FreeOSMemory()
	rssModel := rssKB("VmRSS:")
	all, err := triage.LoadCorpus(corpus)
	if err != nil {
		return err
	}
	var train, test []triage.Example
	for _, e := range all {
		if e.Split == "test" {
			test = append(test, e)
		} else {
			train = append(train, e)
		}
	}
	fmt.Printf("model %s; corpus %s: %d messages, %d for training, %d held out (scored below)\n\n", b.Model(), corpus, len(all), len(train), len(test))
	results := make([]result, len(test))
	for i, e := range test {
		results[i] = score(b, e)
	}
	report(results)
	baselines(train, test)
	if hand != "" {
		if err := handwritten(b, hand); err != nil {
			return err
		}
	}
	if unseen {
		unseenScenarios(train, test)
	}
	speed(b, all, speedFor, rssBefore, rssModel)
	return nil
}

// result is the prediction for one held-out message, after the thresholds of API-NOTES 8.
type result struct {
	e          triage.Example
	category   int
	catConf    float64
	replyP     float64
	replyValue *bool
	urgScore   float64
	urgConf    float64
	urgValue   *string
}

func score(b *triage.Builtin, e triage.Example) result {
	s, _ := b.Analyze(context.Background(), e.In)
	t := triage.Derive(s, b.Model(), time.Now(), 0, e.In.Truncated)
	cat := 0
	for i, c := range db.TriageCategories() {
		if c == t.Category.Value {
			cat = i
		}
	}
	return result{e: e, category: cat, catConf: t.Category.Confidence, replyP: t.NeedsReply.Probability, replyValue: t.NeedsReply.Value,
		urgScore: t.Urgency.Score, urgConf: t.Urgency.Confidence, urgValue: t.Urgency.Value}
}

func pct(n, d int) string {
	if d == 0 {
		return "  n/a"
	}
	return fmt.Sprintf("%5.1f%%", 100*float64(n)/float64(d))
}

func report(rs []result) {
	n := len(rs)
	// Category.
	okCat := 0
	confusion := make([][]int, len(db.TriageCategories()))
	for i := range confusion {
		confusion[i] = make([]int, len(db.TriageCategories()))
	}
	for _, r := range rs {
		confusion[r.e.Category][r.category]++
		if r.category == r.e.Category {
			okCat++
		}
	}
	fmt.Printf("category accuracy        %s  (%d/%d; target >= 85%%)\n", pct(okCat, n), okCat, n)
	// needsReply: the decision at 0.5, and what the thresholds make of it.
	ok5, decided, okDecided, okStrict := 0, 0, 0, 0
	for _, r := range rs {
		if (r.replyP >= 0.5) == r.e.Reply {
			ok5++
		}
		if r.replyValue != nil {
			decided++
			if *r.replyValue == r.e.Reply {
				okDecided++
				okStrict++
			}
		}
	}
	fmt.Printf("needsReply accuracy      %s  (%d/%d, probability >= 0.5 read as yes; target >= 85%%)\n", pct(ok5, n), ok5, n)
	fmt.Printf("  with the thresholds    %s decided (true at >= 0.8, false at <= 0.2), %s of those right; %s of all right, uncertain counted wrong\n",
		pct(decided, n), pct(okDecided, decided), pct(okStrict, n))
	// Urgency.
	within, exact, nulls := 0, 0, 0
	for _, r := range rs {
		level := int(math.Round(r.urgScore))
		if abs(level-r.e.Urgency) <= 1 {
			within++
		}
		if level == r.e.Urgency {
			exact++
		}
		if r.urgValue == nil {
			nulls++
		}
	}
	fmt.Printf("urgency within one level %s  (%d/%d, level = round(score); target >= 90%%)\n", pct(within, n), within, n)
	fmt.Printf("  exact level            %s; value null (confidence < 0.5) for %s\n", pct(exact, n), pct(nulls, n))
	// Calibration of the category confidence and the reply probability.
	fmt.Printf("calibration              category ECE %.3f; needsReply Brier %.3f, ECE %.3f\n\n", ece(rs, func(r result) (float64, bool) {
		return r.catConf, r.category == r.e.Category
	}), brier(rs), ece(rs, func(r result) (float64, bool) {
		return r.replyP, r.e.Reply
	}))

	fmt.Println("category confusion matrix (rows: label, columns: predicted)")
	fmt.Printf("%-14s", "")
	for _, c := range db.TriageCategories() {
		fmt.Printf("%8.7s", c)
	}
	fmt.Printf("%8s\n", "recall")
	for i, row := range confusion {
		fmt.Printf("%-14s", db.TriageCategories()[i])
		t := 0
		for _, v := range row {
			fmt.Printf("%8d", v)
			t += v
		}
		fmt.Printf("%8s\n", pct(row[i], t))
	}
	fmt.Printf("%-14s", "precision")
	for j := range db.TriageCategories() {
		t := 0
		for i := range confusion {
			t += confusion[i][j]
		}
		fmt.Printf("%8s", pct(confusion[j][j], t))
	}
	fmt.Println()

	fmt.Println("\nurgency confusion matrix (rows: label, columns: level of round(score))")
	uc := [4][4]int{}
	for _, r := range rs {
		uc[r.e.Urgency][int(math.Round(r.urgScore))]++
	}
	fmt.Printf("%-14s%8s%8s%8s%8s\n", "", "low", "normal", "high", "critical")
	for i, row := range uc {
		fmt.Printf("%-14s%8d%8d%8d%8d\n", db.UrgencyLevels()[i], row[0], row[1], row[2], row[3])
	}
	fmt.Println("\nneedsReply confusion (rows: label; columns: value after thresholds)")
	rc := map[string]int{}
	for _, r := range rs {
		v := "null"
		if r.replyValue != nil {
			v = strconv.FormatBool(*r.replyValue)
		}
		rc[strconv.FormatBool(r.e.Reply)+" "+v]++
	}
	fmt.Printf("%-14s%8s%8s%8s\n", "", "false", "null", "true")
	for _, l := range []string{"false", "true"} {
		fmt.Printf("%-14s%8d%8d%8d\n", l, rc[l+" false"], rc[l+" null"], rc[l+" true"])
	}
	fmt.Println("\nmistaken categories, by scenario of the message")
	miss := map[string]int{}
	for _, r := range rs {
		if r.category != r.e.Category {
			miss[r.e.Scenario+" -> "+db.TriageCategories()[r.category]]++
		}
	}
	keys := make([]string, 0, len(miss))
	for k := range miss {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %3d  %s\n", miss[k], k)
	}
	fmt.Println()
}

// ece is the expected calibration error over ten equal-width bins: the average gap between
// stated probability and observed frequency, weighted by bin size.
func ece(rs []result, f func(result) (float64, bool)) float64 {
	var cnt, hit [10]int
	var sum [10]float64
	for _, r := range rs {
		p, ok := f(r)
		bin := min(int(p*10), 9)
		cnt[bin]++
		sum[bin] += p
		if ok {
			hit[bin]++
		}
	}
	e := 0.0
	for i := range cnt {
		if cnt[i] > 0 {
			e += math.Abs(sum[i]/float64(cnt[i])-float64(hit[i])/float64(cnt[i])) * float64(cnt[i]) / float64(len(rs))
		}
	}
	return e
}

func brier(rs []result) float64 {
	s := 0.0
	for _, r := range rs {
		y := 0.0
		if r.e.Reply {
			y = 1
		}
		s += (r.replyP - y) * (r.replyP - y)
	}
	return s / float64(len(rs))
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// baselines show how much the corpus gives away: always the most common category, and
// the best rule on one word ("if the message contains w, say A, else B"), both chosen on
// the training split and scored on the held-out one.
func baselines(train, test []triage.Example) {
	counts := make([]int, len(db.TriageCategories()))
	for _, e := range train {
		counts[e.Category]++
	}
	major := 0
	for i := range counts {
		if counts[i] > counts[major] {
			major = i
		}
	}
	ok := 0
	for _, e := range test {
		if e.Category == major {
			ok++
		}
	}
	fmt.Printf("baseline: always %q            %s of held-out categories\n", db.TriageCategories()[major], pct(ok, len(test)))
	words := func(e triage.Example) map[string]bool {
		set := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(e.In.Subject+" "+e.In.Text), func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
		}) {
			set[w] = true
		}
		return set
	}
	type stat struct{ with, without []int }
	stats := map[string]*stat{}
	trainWords := make([]map[string]bool, len(train))
	for i, e := range train {
		trainWords[i] = words(e)
		for w := range trainWords[i] {
			if stats[w] == nil {
				stats[w] = &stat{with: make([]int, len(db.TriageCategories()))}
			}
			stats[w].with[e.Category]++
		}
	}
	bestWord, bestTrain, bestA, bestB := "", -1, 0, 0
	for w, s := range stats {
		a, b := 0, 0
		without := make([]int, len(db.TriageCategories()))
		for i := range counts {
			without[i] = counts[i] - s.with[i]
		}
		for i := range counts {
			if s.with[i] > s.with[a] {
				a = i
			}
			if without[i] > without[b] {
				b = i
			}
		}
		if n := s.with[a] + without[b]; n > bestTrain || (n == bestTrain && w < bestWord) {
			bestWord, bestTrain, bestA, bestB = w, n, a, b
		}
	}
	ok = 0
	for _, e := range test {
		pred := bestB
		if words(e)[bestWord] {
			pred = bestA
		}
		if pred == e.Category {
			ok++
		}
	}
	fmt.Printf("baseline: best one-word rule %-8q %s of held-out categories (contains it: %s, else %s)\n\n", bestWord, pct(ok, len(test)),
		db.TriageCategories()[bestA], db.TriageCategories()[bestB])
}

// handwritten scores messages written by hand, apart from the generator, with other
// senders, phrasing and lengths: how the model does on mail unlike its corpus.
func handwritten(b *triage.Builtin, path string) error {
	ex, err := triage.LoadCorpus(path)
	if err != nil {
		return err
	}
	okCat, okReply, within := 0, 0, 0
	var misses []string
	for _, e := range ex {
		r := score(b, e)
		level := int(math.Round(r.urgScore))
		if r.category == e.Category {
			okCat++
		}
		if (r.replyP >= 0.5) == e.Reply {
			okReply++
		}
		if abs(level-e.Urgency) <= 1 {
			within++
		}
		if r.category != e.Category || (r.replyP >= 0.5) != e.Reply || abs(level-e.Urgency) > 1 {
			misses = append(misses, fmt.Sprintf("  %s %-52.52q label %s/%t/%d, got %s (%.2f) / %.2f / %.2f", e.ID, e.In.Subject,
				db.TriageCategories()[e.Category], e.Reply, e.Urgency, db.TriageCategories()[r.category], r.catConf, r.replyP, r.urgScore))
		}
	}
	n := len(ex)
	fmt.Printf("hand-written messages (%s, not from the generator, never trained on): %d\n", path, n)
	fmt.Printf("  category %s, needsReply %s, urgency within one level %s\n", pct(okCat, n), pct(okReply, n), pct(within, n))
	for _, m := range misses {
		fmt.Println(m)
	}
	fmt.Println()
	return nil
}

// unseenScenarios scores each held-out message with a model trained without any message of
// its scenario group (scenarios split into five groups by name).
func unseenScenarios(train, test []triage.Example) {
	var names []string
	seen := map[string]bool{}
	for _, e := range append(append([]triage.Example(nil), train...), test...) {
		if !seen[e.Scenario] {
			seen[e.Scenario] = true
			names = append(names, e.Scenario)
		}
	}
	sort.Strings(names)
	group := map[string]int{}
	for i, n := range names {
		group[n] = i % 5
	}
	var rs []result
	for g := 0; g < 5; g++ {
		var tr []triage.Example
		for _, e := range train {
			if group[e.Scenario] != g {
				tr = append(tr, e)
			}
		}
		m := triage.Train(tr, triage.TrainOptions{Lambdas: []float64{1e-4}, Folds: 2, Iterations: 200})
		b := triage.NewBuiltinModel(m)
		for _, e := range test {
			if group[e.Scenario] == g {
				rs = append(rs, score(b, e))
			}
		}
	}
	okCat, okReply, within := 0, 0, 0
	for _, r := range rs {
		if r.category == r.e.Category {
			okCat++
		}
		if (r.replyP >= 0.5) == r.e.Reply {
			okReply++
		}
		if abs(int(math.Round(r.urgScore))-r.e.Urgency) <= 1 {
			within++
		}
	}
	fmt.Printf("unseen kinds of mail (%d scenarios in 5 groups, each scored by a model trained without its group):\n", len(names))
	fmt.Printf("  category %s, needsReply %s, urgency within one level %s over %d held-out messages\n\n",
		pct(okCat, len(rs)), pct(okReply, len(rs)), pct(within, len(rs)), len(rs))
}

// speed classifies the corpus over and over on one core (input limits, features, three
// heads and thresholds: all the worker does besides the database) and reports messages per
// second, then the same for messages at the 32,768-character limit, and resident memory.
func speed(b *triage.Builtin, all []triage.Example, d time.Duration, rssBefore, rssModel int64) {
	ctx := context.Background()
	run := func(ins []triage.Input) (float64, int) {
		start := time.Now()
		n := 0
		for time.Since(start) < d {
			for _, in := range ins {
				in = triage.NewInput(in.From, in.To, nil, in.Subject, in.ReceivedAt, in.Text)
				s, _ := b.Analyze(ctx, in)
				_ = triage.Derive(s, b.Model(), start, 0, in.Truncated)
				n++
			}
		}
		return float64(n) / time.Since(start).Seconds(), n
	}
	ins := make([]triage.Input, len(all))
	chars := 0
	for i, e := range all {
		ins[i] = e.In
		chars += len([]rune(e.In.Text))
	}
	rate, n := run(ins)
	fmt.Printf("throughput (1 core)      %.0f messages/s over %d classifications of the corpus (mean %d characters); target >= 2,000/s\n",
		rate, n, chars/len(all))
	sized := func(chars int) []triage.Input {
		out := make([]triage.Input, 0, 50)
		for i := 0; i < 50; i++ {
			in := all[i].In
			var sb strings.Builder
			for sb.Len() < chars {
				sb.WriteString(all[(i+sb.Len())%len(all)].In.Text)
				sb.WriteString("\n")
			}
			in.Text = string([]rune(sb.String())[:chars])
			out = append(out, in)
		}
		return out
	}
	rate, n = run(sized(4000))
	fmt.Printf("  at 4,000 characters    %.0f messages/s over %d classifications\n", rate, n)
	rate, n = run(sized(40000))
	fmt.Printf("  at the 32,768-char cap %.0f messages/s over %d classifications (40,000-character texts, cut)\n", rate, n)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("resident memory          %.1f MB before the model, %.1f MB with it loaded: the model adds %.1f MB; peak of the whole eval process (with the corpus, long inputs and any retraining) %.1f MB; Go heap in use now %.1f MB (target: < 50 MB added)\n",
		float64(rssBefore)/1024, float64(rssModel)/1024, float64(rssModel-rssBefore)/1024, float64(rssKB("VmHWM:"))/1024, float64(ms.HeapInuse)/(1<<20))
}

// rssKB reads a memory figure of this process in kB from /proc (Linux): VmRSS is the
// resident set now, VmHWM its peak. 0 elsewhere.
func rssKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field) {
			f := strings.Fields(l)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}
