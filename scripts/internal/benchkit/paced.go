package benchkit

import (
	"fmt"
	"sync"
	"time"
)

// Paced sends msgs[i] to to[i] at rate messages a second, spread over conns pipelined
// SMTP connections (a message waits for a free connection when the server falls behind),
// and calls acked(i, t) with the moment each 250 arrived. It returns when every message
// is answered; the first error ends it.
func Paced(addr string, msgs [][]byte, to []string, rate float64, conns int, acked func(i int, at time.Time)) error {
	jobs := make(chan int)
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := dialSMTP(addr)
			if err != nil {
				errs <- err
				return
			}
			defer s.close()
			for i := range jobs {
				if err := s.send("sender@"+SenderDomain, to[i], msgs[i]); err != nil {
					errs <- fmt.Errorf("message %d: %w", i, err)
					return
				}
				acked(i, time.Now())
			}
		}()
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	var err error
send:
	for i := range msgs {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		select {
		case jobs <- i:
		case err = <-errs:
			break send
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err != nil {
		return err
	}
	return <-errs
}
