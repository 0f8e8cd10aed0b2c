package sqldb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen returns the payloads of PostgreSQL notifications on channel, on
// a connection of its own, until ctx ends (then the channel closes). A
// lost connection is re-established with backoff, and the reader woken
// with an empty payload; notifications sent while it was down are lost,
// so a listener also polls what it watches (Listen only makes it
// prompt). On SQLite, where one process is every writer, the
// notifications are this process's own (Notify's), or none when local
// is false.
func (c *Conn) Listen(ctx context.Context, channel string, local bool) (<-chan string, error) {
	if c.Dialect != Postgres {
		if !local {
			return nil, nil
		}
		return c.listenLocal(ctx, channel), nil
	}
	conn, err := c.listenConn(ctx, channel)
	if err != nil {
		return nil, err
	}
	out := make(chan string, 64)
	go func() {
		defer close(out)
		backoff := 100 * time.Millisecond
		for {
			if conn == nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				if conn, err = c.listenConn(ctx, channel); err != nil {
					backoff = min(2*backoff, 5*time.Second)
					continue
				}
				backoff = 100 * time.Millisecond
				// Wake the reader: anything may have happened meanwhile.
				select {
				case out <- "":
				default:
				}
			}
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = conn.Close(closeCtx)
				cancel()
				conn = nil
				if ctx.Err() != nil {
					return
				}
				continue
			}
			select {
			case out <- n.Payload:
			default:
				// A slow reader: drop, it polls anyway.
			}
		}
	}()
	return out, nil
}

func (c *Conn) listenConn(ctx context.Context, channel string) (*pgx.Conn, error) {
	if c.URL == "" {
		return nil, errors.New("listen: no PostgreSQL URL")
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, c.URL)
	if err != nil {
		return nil, fmt.Errorf("listen: connect: %w", err)
	}
	if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("listen %s: %w", channel, err)
	}
	return conn, nil
}

// Wakes is Listen for a reader that needs to know only that something
// was notified: one value pending at most stands for any number of
// notifications. It is nil when Listen's channel is.
func (c *Conn) Wakes(ctx context.Context, channel string, local bool) (<-chan struct{}, error) {
	payloads, err := c.Listen(ctx, channel, local)
	if err != nil || payloads == nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range payloads {
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, nil
}

// Notify sends a notification on channel: PostgreSQL's to every
// replica, or on SQLite to this process's local listeners. A slow
// listener misses it (it polls too).
func (c *Conn) Notify(ctx context.Context, channel, payload string) error {
	if c.Dialect != Postgres {
		c.localMu.Lock()
		defer c.localMu.Unlock()
		for ch := range c.local[channel] {
			select {
			case ch <- payload:
			default:
			}
		}
		return nil
	}
	return c.DB.WithContext(ctx).Exec("SELECT pg_notify(?, ?)", channel, payload).Error
}

// listenLocal registers an in-process listener on channel until ctx ends.
func (c *Conn) listenLocal(ctx context.Context, channel string) <-chan string {
	ch := make(chan string, 64)
	c.localMu.Lock()
	if c.local == nil {
		c.local = map[string]map[chan string]struct{}{}
	}
	if c.local[channel] == nil {
		c.local[channel] = map[chan string]struct{}{}
	}
	c.local[channel][ch] = struct{}{}
	c.localMu.Unlock()
	context.AfterFunc(ctx, func() {
		c.localMu.Lock()
		delete(c.local[channel], ch)
		c.localMu.Unlock()
		close(ch)
	})
	return ch
}
