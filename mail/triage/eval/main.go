// Command eval measures the built-in triage model: how it does on mail it was never trained
// on, how sure it is (calibration, and how often it declines to answer), and its speed and
// memory on one core. scripts/triage-eval.sh runs it; fixtures/triage/README.md says what
// each file is.
//
//	go run ./mail/triage/eval [-corpus FILE] [-written GLOB] [-handwritten FILES] [-model FILE] [-folds]
//
// It scores, with the model embedded in the binary (or -model):
//   - the hand-written test sets (-handwritten), which no training ever reads;
//   - the generator's held-out split (same kinds of mail as its training split).
//
// -folds adds retrainings, each with the hyperparameters the model was trained with:
//   - unseen kinds: the kinds of mail (scenarios, over the generated and the written files)
//     are split into five groups; each group is scored by a model trained without it;
//   - unseen writers: each writer (the generator, and each hand writer) is scored by a
//     model trained without anything it wrote.
//
// A needsReply or urgency value of null (the model declines to answer, API-NOTES section 8)
// counts as wrong in every accuracy figure; the null rate is reported beside it.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/mail/triage"
)

func main() {
	corpus := flag.String("corpus", "fixtures/triage/corpus.jsonl", "generated corpus (JSON lines)")
	written := flag.String("written", "fixtures/triage/written/*.jsonl", "files written by hand for training (glob)")
	hand := flag.String("handwritten", "fixtures/triage/handwritten*.jsonl", "hand-written test sets, never trained on (a glob; \"\" for none)")
	modelFile := flag.String("model", "", "model file (default: the model embedded in the binary)")
	folds := flag.Bool("folds", false, "also score unseen kinds and unseen writers (retrains a model for each fold)")
	flag.BoolVar(&listFoldMisses, "fold-misses", false, "with -folds, list each message an unseen-writer fold got wrong (to review labels)")
	speedFor := flag.Duration("speed", 3*time.Second, "how long to measure speed")
	flag.Parse()
	if err := run(*corpus, *written, *hand, *modelFile, *folds, *speedFor); err != nil {
		fmt.Fprintln(os.Stderr, "eval:", err)
		os.Exit(1)
	}
}

func run(corpus, written, hand, modelFile string, folds bool, speedFor time.Duration) error {
	rssBefore := rssKB("VmRSS:")
	m, err := loadModel(modelFile)
	if err != nil {
		return err
	}
	b := triage.NewBuiltinModel(m)
	runtime.GC()
	debug.FreeOSMemory()
	rssModel := rssKB("VmRSS:")
	all, err := triage.LoadTrainingSet(corpus, written, mail.HTMLToText)
	if err != nil {
		return err
	}
	var handSet []triage.Example
	handFiles, err := filepath.Glob(hand)
	if err != nil {
		return err
	}
	for _, f := range handFiles {
		ex, err := triage.LoadCorpus(f, mail.HTMLToText)
		if err != nil {
			return err
		}
		handSet = append(handSet, ex...)
	}
	train := triage.TrainSplit(all)
	fmt.Printf("model %s (%d features); %d training messages (%s), %d hand-written test messages\n\n",
		b.Model(), len(m.Features), len(train), writerCounts(train), len(handSet))

	var summary []line
	if len(handSet) > 0 {
		rs := scoreAll(b, handSet)
		fmt.Printf("== hand-written test sets (%s: %s), never trained on\n", strings.Join(handFiles, ", "), writerCounts(handSet))
		report(rs, true)
		summary = append(summary, summarize("hand-written, never trained on", rs))
	}
	var genTest []triage.Example
	for _, e := range all {
		if e.Split == "test" && e.Writer == triage.GeneratorWriter {
			genTest = append(genTest, e)
		}
	}
	if len(genTest) > 0 {
		rs := scoreAll(b, genTest)
		fmt.Println("== the generator's held-out split (kinds of mail it was trained on)")
		report(rs, false)
		summary = append(summary, summarize("generator's held-out split (seen kinds)", rs))
	}
	if folds {
		rs := unseenKinds(m, all)
		summary = append(summary, summarize("unseen kinds (5 folds)", rs))
		summary = append(summary, unseenWriters(m, all)...)
	}
	fmt.Println("== summary (needsReply and urgency: a null value counts as wrong)")
	fmt.Printf("%-44s %6s %9s %10s %10s %9s %9s\n", "", "n", "category", "needsReply", "urgency±1", "reply null", "urg. null")
	for _, l := range summary {
		fmt.Println(l)
	}
	fmt.Println()
	runtime.GOMAXPROCS(1) // the speed target is for one core
	speed(b, all, speedFor, rssBefore, rssModel)
	return nil
}

func loadModel(file string) (*triage.Model, error) {
	if file == "" {
		return triage.EmbeddedModel()
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return triage.LoadModel(raw)
}

func writerCounts(ex []triage.Example) string {
	n := map[string]int{}
	for _, e := range ex {
		n[e.Writer]++
	}
	var parts []string
	for _, w := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s %d", w, n[w]))
	}
	return strings.Join(parts, ", ")
}

// listFoldMisses lists the messages each unseen-writer fold got wrong.
var listFoldMisses bool

// result is the prediction for one message, after the thresholds of API-NOTES 8.
type result struct {
	e          triage.Example
	category   int
	catConf    float64
	replyP     float64
	replyValue *bool
	urgScore   float64
	urgConf    float64
	urgLevel   int // the level of round(score)
	urgNull    bool
}

func score(b *triage.Builtin, e triage.Example) result {
	s, _ := b.Analyze(context.Background(), e.In)
	t := triage.Derive(s, b.Model(), time.Now(), 0, e.In.Truncated)
	cat := slices.Index(db.TriageCategories(), t.Category.Value)
	return result{e: e, category: cat, catConf: t.Category.Confidence, replyP: t.NeedsReply.Probability, replyValue: t.NeedsReply.Value,
		urgScore: t.Urgency.Score, urgConf: t.Urgency.Confidence, urgLevel: int(math.Round(t.Urgency.Score)), urgNull: t.Urgency.Value == nil}
}

func scoreAll(b *triage.Builtin, ex []triage.Example) []result {
	rs := make([]result, len(ex))
	for i, e := range ex {
		rs[i] = score(b, e)
	}
	return rs
}

func (r result) catOK() bool   { return r.category == r.e.Category }
func (r result) replyOK() bool { return r.replyValue != nil && *r.replyValue == r.e.Reply }
func (r result) urgOK() bool   { return !r.urgNull && abs(r.urgLevel-r.e.Urgency) <= 1 }

func pct(n, d int) string {
	if d == 0 {
		return "  n/a"
	}
	return fmt.Sprintf("%5.1f%%", 100*float64(n)/float64(d))
}

func count(rs []result, f func(result) bool) int {
	n := 0
	for _, r := range rs {
		if f(r) {
			n++
		}
	}
	return n
}

// line is one row of the summary table.
type line string

func summarize(name string, rs []result) line {
	n := len(rs)
	return line(fmt.Sprintf("%-44s %6d %9s %10s %10s %9s %9s", name, n, pct(count(rs, result.catOK), n), pct(count(rs, result.replyOK), n),
		pct(count(rs, result.urgOK), n), pct(count(rs, func(r result) bool { return r.replyValue == nil }), n),
		pct(count(rs, func(r result) bool { return r.urgNull }), n)))
}

// report prints each head's accuracy, null rate and calibration, and the confusion
// matrices; misses lists each message with a wrong answer.
func report(rs []result, misses bool) {
	n := len(rs)
	fmt.Printf("category                 %s  (%d/%d)\n", pct(count(rs, result.catOK), n), count(rs, result.catOK), n)
	nullReply := count(rs, func(r result) bool { return r.replyValue == nil })
	fmt.Printf("needsReply               %s  (null counted wrong; null for %s; probability >= 0.5 read as yes: %s)\n",
		pct(count(rs, result.replyOK), n), pct(nullReply, n), pct(count(rs, func(r result) bool { return (r.replyP >= 0.5) == r.e.Reply }), n))
	nullUrg := count(rs, func(r result) bool { return r.urgNull })
	fmt.Printf("urgency within one level %s  (null counted wrong; null for %s; level of round(score) ignoring null: %s, exact %s)\n",
		pct(count(rs, result.urgOK), n), pct(nullUrg, n), pct(count(rs, func(r result) bool { return abs(r.urgLevel-r.e.Urgency) <= 1 }), n),
		pct(count(rs, func(r result) bool { return r.urgLevel == r.e.Urgency }), n))
	fmt.Printf("calibration              category ECE %.3f; needsReply Brier %.3f, ECE %.3f\n\n",
		ece(rs, func(r result) (float64, bool) { return r.catConf, r.catOK() }), brier(rs),
		ece(rs, func(r result) (float64, bool) { return r.replyP, r.e.Reply }))
	categoryConfusion(rs)
	otherConfusions(rs)
	if misses {
		fmt.Println("\nmessages with a wrong or null answer (label category/needsReply/urgency; got category (confidence) / reply probability / urgency score)")
		for _, r := range rs {
			if !r.catOK() || !r.replyOK() || !r.urgOK() {
				fmt.Printf("  %-8s %-46.46q %s/%t/%d, got %s (%.2f) / %.2f / %.2f\n", r.e.ID, r.e.In.Subject, db.TriageCategories()[r.e.Category],
					r.e.Reply, r.e.Urgency, db.TriageCategories()[r.category], r.catConf, r.replyP, r.urgScore)
			}
		}
	}
	fmt.Println()
}

func categoryConfusion(rs []result) {
	cats := db.TriageCategories()
	confusion := make([][]int, len(cats))
	for i := range confusion {
		confusion[i] = make([]int, len(cats))
	}
	for _, r := range rs {
		confusion[r.e.Category][r.category]++
	}
	fmt.Println("category confusion (rows: label, columns: predicted)")
	fmt.Printf("%-14s", "")
	for _, c := range cats {
		fmt.Printf("%8.7s", c)
	}
	fmt.Printf("%8s\n", "recall")
	for i, row := range confusion {
		fmt.Printf("%-14s", cats[i])
		t := 0
		for _, v := range row {
			fmt.Printf("%8d", v)
			t += v
		}
		fmt.Printf("%8s\n", pct(row[i], t))
	}
	fmt.Printf("%-14s", "precision")
	for j := range cats {
		t := 0
		for i := range confusion {
			t += confusion[i][j]
		}
		fmt.Printf("%8s", pct(confusion[j][j], t))
	}
	fmt.Println()
}

func otherConfusions(rs []result) {
	fmt.Println("\nurgency (rows: label; columns: value, null when confidence < 0.5)")
	uc := [4][5]int{}
	for _, r := range rs {
		col := r.urgLevel
		if r.urgNull {
			col = 4
		}
		uc[r.e.Urgency][col]++
	}
	fmt.Printf("%-14s%8s%8s%8s%8s%8s\n", "", "low", "normal", "high", "critical", "null")
	for i, row := range uc {
		fmt.Printf("%-14s%8d%8d%8d%8d%8d\n", db.UrgencyLevels()[i], row[0], row[1], row[2], row[3], row[4])
	}
	fmt.Println("\nneedsReply (rows: label; columns: value after thresholds)")
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

// retrain fits a model on train with the hyperparameters of m (its heads' penalties and
// temperatures), so a fold costs one fit per head.
func retrain(m *triage.Model, train []triage.Example) *triage.Builtin {
	return triage.NewBuiltinModel(triage.Train(train, triage.SameAs(m)))
}

// unseenKinds scores every message of the generated and written files by a model trained
// without any message of its kind's group.
func unseenKinds(m *triage.Model, all []triage.Example) []result {
	var rs []result
	for g := 0; g < 5; g++ {
		var tr, te []triage.Example
		for _, e := range all {
			switch {
			case triage.KindFold(e.Scenario, 5) == g:
				te = append(te, e)
			case e.Split == "train":
				tr = append(tr, e)
			}
		}
		b := retrain(m, tr)
		rs = append(rs, scoreAll(b, te)...)
	}
	kinds := map[string]bool{}
	for _, e := range all {
		kinds[e.Scenario] = true
	}
	fmt.Printf("== unseen kinds: %d kinds of mail in 5 groups, each group scored by a model trained without it\n", len(kinds))
	report(rs, false)
	return rs
}

// unseenWriters scores each writer's messages by a model trained without anything that
// writer wrote.
func unseenWriters(m *triage.Model, all []triage.Example) []line {
	writers := map[string]bool{}
	for _, e := range all {
		writers[e.Writer] = true
	}
	var out []line
	var pooled []result
	for _, w := range slices.Sorted(maps.Keys(writers)) {
		var tr, te []triage.Example
		for _, e := range all {
			switch {
			case e.Writer == w:
				te = append(te, e)
			case e.Split == "train":
				tr = append(tr, e)
			}
		}
		rs := scoreAll(retrain(m, tr), te)
		pooled = append(pooled, rs...)
		out = append(out, summarize("unseen writer "+w+" (trained without it)", rs))
		fmt.Printf("== unseen writer %s: its %d messages scored by a model trained on the other writers (%d messages)\n", w, len(te), len(tr))
		report(rs, listFoldMisses)
	}
	return append(out, summarize("unseen writers, pooled", pooled))
}

// speed classifies the corpus over and over on one core (input limits, features, three
// heads and thresholds: all the worker does besides the database) and reports the CPU time
// per message, then the same for long messages, and resident memory.
func speed(b *triage.Builtin, all []triage.Example, d time.Duration, rssBefore, rssModel int64) {
	ctx := context.Background()
	run := func(ins []triage.Input) (float64, float64, int) {
		start, cpu0 := time.Now(), cpuTime()
		n := 0
		for time.Since(start) < d {
			for _, in := range ins {
				in2 := triage.NewInput(in.From, in.To, nil, in.Subject, in.ReceivedAt, in.Text)
				in2.Headers, in2.RepliesToOurs = in.Headers, in.RepliesToOurs
				s, _ := b.Analyze(ctx, in2)
				_ = triage.Derive(s, b.Model(), start, 0, in2.Truncated)
				n++
			}
		}
		cpu := (cpuTime() - cpu0).Seconds()
		return cpu / float64(n) * 1e6, float64(n) / cpu, n
	}
	ins := make([]triage.Input, len(all))
	chars := 0
	for i, e := range all {
		ins[i] = e.In
		chars += len([]rune(e.In.Text))
	}
	us, rate, n := run(ins)
	fmt.Printf("speed (1 core, CPU time) %.1f µs a message = %.0f messages/s over %d classifications of the corpus (mean %d characters); target >= 2,000/s\n",
		us, rate, n, chars/len(all))
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
	us, rate, n = run(sized(4000))
	fmt.Printf("  at 4,000 characters    %.1f µs a message = %.0f/s over %d classifications\n", us, rate, n)
	us, rate, n = run(sized(40000))
	fmt.Printf("  at the 32,768-char cap %.1f µs a message = %.0f/s over %d classifications (40,000-character texts, cut)\n", us, rate, n)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("resident memory          %.1f MB before the model, %.1f MB with it loaded: the model adds %.1f MB (target <= 50 MB); peak of the whole eval process (corpus, long inputs, retraining) %.1f MB; Go heap in use now %.1f MB\n",
		float64(rssBefore)/1024, float64(rssModel)/1024, float64(rssModel-rssBefore)/1024, float64(rssKB("VmHWM:"))/1024, float64(ms.HeapInuse)/(1<<20))
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
