package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// keyWatch checks the keys of open streams again, so that a key revoked or expired
// while streaming ends its streams (extensions section 4). It checks each key once per
// interval however many streams share it: idle streams cost no reads of their own.
type keyWatch struct {
	check func(ctx context.Context, token string) error
	every time.Duration

	mu   sync.Mutex
	keys map[string]*watchedKey // by token

	stop chan struct{}
	done chan struct{}
}

type watchedKey struct {
	streams int
	gone    chan struct{} // closed when the key stops working
}

func newKeyWatch(check func(ctx context.Context, token string) error, every time.Duration) *keyWatch {
	kw := &keyWatch{check: check, every: every, keys: map[string]*watchedKey{}, stop: make(chan struct{}), done: make(chan struct{})}
	go kw.run()
	return kw
}

// watch follows token until release; gone is closed when the key stops working.
func (kw *keyWatch) watch(token string) (gone <-chan struct{}, release func()) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	k := kw.keys[token]
	if k == nil {
		k = &watchedKey{gone: make(chan struct{})}
		kw.keys[token] = k
	}
	k.streams++
	return k.gone, func() {
		kw.mu.Lock()
		defer kw.mu.Unlock()
		if k.streams--; k.streams == 0 && kw.keys[token] == k {
			delete(kw.keys, token)
		}
	}
}

func (kw *keyWatch) run() {
	defer close(kw.done)
	t := time.NewTicker(kw.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			kw.checkAll()
		case <-kw.stop:
			return
		}
	}
}

// checkAll checks every watched key. A key the store refuses ends its streams; a store
// that cannot answer now ends nothing (the next round checks again).
func (kw *keyWatch) checkAll() {
	kw.mu.Lock()
	tokens := make([]string, 0, len(kw.keys))
	for t := range kw.keys {
		tokens = append(tokens, t)
	}
	kw.mu.Unlock()
	for _, t := range tokens {
		ctx, cancel := context.WithTimeout(context.Background(), kw.every)
		err := kw.check(ctx, t)
		cancel()
		var de *db.Error
		if !errors.As(err, &de) || (de.Code != db.ECodeUnauthorized && de.Code != db.ECodeAccessDenied) {
			continue
		}
		kw.mu.Lock()
		if k := kw.keys[t]; k != nil {
			close(k.gone)
			delete(kw.keys, t)
		}
		kw.mu.Unlock()
	}
}

func (kw *keyWatch) close() {
	close(kw.stop)
	<-kw.done
}
