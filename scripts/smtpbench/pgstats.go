package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgWatch is -pg-statements: what PostgreSQL did during one SMTP run, from its own views
// (pg_stat_statements, loaded by startCluster; pg_stat_activity): statements and
// transactions per message, the costliest statements, and what the inboxd backends were
// waiting on when sampled (those in a transaction or running a statement). A sample is
// one backend in one state, every 10 ms.
type pgWatch struct {
	conn    *pgx.Conn
	stop    chan struct{}
	done    sync.WaitGroup
	samples map[string]int // "active" or the wait event, per backend sample
}

// watchPostgres resets the statistics and starts sampling the backends' waits.
func watchPostgres(ctx context.Context, url string) (*pgWatch, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	for _, q := range []string{"CREATE EXTENSION IF NOT EXISTS pg_stat_statements", "SELECT pg_stat_statements_reset()", "SELECT pg_stat_reset()"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	w := &pgWatch{conn: conn, stop: make(chan struct{}), samples: map[string]int{}}
	w.done.Add(1)
	go w.sample(ctx)
	return w, nil
}

func (w *pgWatch) sample(ctx context.Context) {
	defer w.done.Done()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		// Idle in a transaction is a backend waiting for inboxd's next statement, holding
		// the transaction's locks meanwhile.
		rows, err := w.conn.Query(ctx, `SELECT CASE WHEN state = 'active' THEN COALESCE(wait_event_type || ':' || wait_event, 'on CPU')
			ELSE state END FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND state IN ('active', 'idle in transaction') AND pid <> pg_backend_pid()`)
		if err != nil {
			return
		}
		for rows.Next() {
			var s string
			if rows.Scan(&s) == nil {
				w.samples[s]++
			}
		}
		rows.Close()
	}
}

// report stops the sampling and prints what PostgreSQL did for n messages.
func (w *pgWatch) report(ctx context.Context, n int) error {
	close(w.stop)
	w.done.Wait()
	defer w.conn.Close(ctx)
	// The harness's own queries (this sampling, benchkit.Drain's polling), each a
	// transaction of its own, are left out.
	const harness = `(query LIKE '%pg_stat%' OR query LIKE '%FROM triage_queue) +%')`
	var xacts int64
	if err := w.conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback - (SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements WHERE `+harness+`)
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&xacts); err != nil {
		return err
	}
	rows, err := w.conn.Query(ctx, `SELECT calls, total_exec_time, query FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND NOT `+harness+` ORDER BY total_exec_time DESC`)
	if err != nil {
		return err
	}
	type stmt struct {
		calls int64
		ms    float64
		query string
	}
	var all []stmt
	var calls int64
	var ms float64
	for rows.Next() {
		var s stmt
		if err := rows.Scan(&s.calls, &s.ms, &s.query); err != nil {
			return err
		}
		all = append(all, s)
		calls += s.calls
		ms += s.ms
	}
	if err := rows.Err(); err != nil {
		return err
	}
	per := func(v float64) float64 { return v / float64(n) }
	fmt.Printf("  PostgreSQL, per message: %.1f statements, %.2f transactions, %.0f us executing statements\n", per(float64(calls)), per(float64(xacts)), per(ms*1000))
	for _, s := range all[:min(12, len(all))] {
		q := strings.Join(strings.Fields(s.query), " ")
		if len(q) > 110 {
			q = q[:110] + "..."
		}
		fmt.Printf("    %5.2f calls %5.0f us  %s\n", per(float64(s.calls)), per(s.ms*1000), q)
	}
	total := 0
	for _, c := range w.samples {
		total += c
	}
	var states []string
	for s := range w.samples {
		states = append(states, s)
	}
	sort.Slice(states, func(i, j int) bool { return w.samples[states[i]] > w.samples[states[j]] })
	fmt.Printf("  inboxd backends in a transaction or a statement, %d samples every 10 ms:", total)
	for _, s := range states[:min(6, len(states))] {
		fmt.Printf(" %s %.0f%%", s, 100*float64(w.samples[s])/float64(total))
	}
	fmt.Println()
	return nil
}

// waitForStatistics waits until autovacuum has analyzed the messages table since the SMTP
// run filled it, as it does within a minute or so on any running database, so that -reads
// measures the plans a database in service has rather than those of its first minute: a
// table analyzed while nearly empty makes PostgreSQL sort an inbox's whole list for a page
// (16 ms instead of 0.9 ms for 4,000 messages, measured with EXPLAIN ANALYZE).
func waitForStatistics(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	start := time.Now()
	for time.Since(start) < 3*time.Minute {
		var fresh bool
		err := conn.QueryRow(ctx, `SELECT COALESCE(bool_and(n_mod_since_analyze * 10 < n_live_tup + 50), false)
			FROM pg_stat_user_tables WHERE relname IN ('messages', 'threads', 'message_labels')`).Scan(&fresh)
		if err != nil {
			return err
		}
		if fresh {
			fmt.Printf("  (autovacuum analyzed the tables %.0f s after the SMTP run)\n", time.Since(start).Seconds())
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("autovacuum did not analyze the tables within 3 minutes")
}
