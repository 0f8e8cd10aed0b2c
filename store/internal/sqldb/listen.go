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
// lost connection is re-established with backoff; notifications sent
// while it was down are lost, so a listener also polls what it watches
// (Listen only makes it prompt). On SQLite it returns nil: one node sees
// its own writes.
func (c *Conn) Listen(ctx context.Context, channel string) (<-chan string, error) {
	if c.Dialect != Postgres {
		return nil, nil
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

// Notify sends a PostgreSQL notification on channel (nothing on SQLite).
func (c *Conn) Notify(ctx context.Context, channel, payload string) error {
	if c.Dialect != Postgres {
		return nil
	}
	return c.DB.WithContext(ctx).Exec("SELECT pg_notify(?, ?)", channel, payload).Error
}
