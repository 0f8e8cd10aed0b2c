package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/opsmcp/platform/migrations"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/testkit/platformtest"
)

// TestReplicasStartingAtOnceMigrateAnEmptyDatabaseTogether: replicas of
// a fleet (or a Deployment's pods) that start at the same moment on an
// empty PostgreSQL database all migrate at start. Every one of them
// succeeds, and the migrations are applied exactly once: creating the
// bookkeeping table is serialised with the migrations themselves (the
// fleet test found replicas failing with a duplicate pg_type row when
// two created it at once).
func TestReplicasStartingAtOnceMigrateAnEmptyDatabaseTogether(t *testing.T) {
	ctx := context.Background()
	url := platformtest.PostgresSchemaURL(t)
	const replicas = 8
	stores := make([]*store.Store, replicas)
	for i := range stores {
		st, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stores[i] = st
	}
	start := make(chan struct{})
	applied := make([]int, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			applied[i], errs[i] = st.Migrate(ctx)
		}()
	}
	close(start)
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
		total += applied[i]
	}
	pending, err := stores[0].Pending(ctx)
	if err != nil || pending != 0 {
		t.Fatalf("pending migrations after every replica migrated: %d, %v", pending, err)
	}
	again, err := stores[0].Migrate(ctx)
	if err != nil || again != 0 {
		t.Fatalf("a later start applied %d migrations (%v)", again, err)
	}
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	if total != len(all) {
		t.Fatalf("%d migrations applied across the replicas; there are %d", total, len(all))
	}
}
