package endpoint_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/opsmcp/platform/testkit/platformtest"
)

// acceptHook accepts every call offered as a task, at once, without
// verifying, so the figures measure the platform.
func acceptHook(b *testing.B) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"accepted"}`))
	}))
	b.Cleanup(s.Close)
	return s
}

const taskMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// rpc posts one 2026-07-28 request and returns its result.
func rpc(client *http.Client, url, method, name string, body []byte) (map[string]any, error) {
	m, err := postMCP(client, url, method, name, body)
	if err != nil {
		return nil, err
	}
	res, ok := m["result"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: no result: %v", method, m)
	}
	return res, nil
}

// BenchmarkTasks is a task's creation (tools/call answered with a task:
// the row written before the answer, the backend's delivery, its
// acceptance) and a tasks/get of a live task, through the full HTTP
// stack in process, on each store. It reports the CPU of the whole
// process per operation (client, platform, backend, database driver;
// PostgreSQL's own CPU is another process's) beside the wall time.
func BenchmarkTasks(b *testing.B) {
	for _, d := range []struct{ name, url string }{
		{"postgres", platformtest.PostgresSchemaURL(b)},
		{"sqlite", platformtest.SQLiteURL(b)},
	} {
		hook := acceptHook(b)
		p := platformtest.Start(b, d.url)
		p.MustAdmin(b, 201, "POST", "/api/v1/tenants", obj{"slug": "acme", "displayName": "Acme",
			"settings": obj{"auth": obj{"public": true}, "maxLiveTasks": 1_000_000, "maxLiveTasksPerPrincipal": 1_000_000}})
		p.Tool(b, "acme", taskTool("export", hook.URL, "may"))
		url := p.URL + "/t/acme/mcp"
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		create := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"export","arguments":{},` + taskMeta + `}}`)
		first, err := rpc(client, url, "tools/call", "export", create)
		if err != nil || first["resultType"] != "task" {
			b.Fatalf("create: %v %v", first, err)
		}
		id, _ := first["taskId"].(string)
		b.Run(d.name+"-create", func(b *testing.B) {
			b.ReportAllocs()
			cpu := platformtest.CPUTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if res, err := rpc(client, url, "tools/call", "export", create); err != nil || res["resultType"] != "task" {
					b.Fatalf("create: %v %v", res, err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((platformtest.CPUTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
		get := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + id + `",` + taskMeta + `}}`)
		b.Run(d.name+"-get", func(b *testing.B) {
			b.ReportAllocs()
			cpu := platformtest.CPUTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if res, err := rpc(client, url, "tasks/get", id, get); err != nil || res["status"] != "working" {
					b.Fatalf("get: %v %v", res, err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((platformtest.CPUTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkOpenTasksIdle is what open tasks cost a replica that serves
// nothing: its heap in use (after a forced GC), its goroutines and the
// CPU it spends per second of idleness (the catalogue refresh, the task
// sweep's due-time query, the expiry pass), with no task and then with
// BENCH_OPEN_TASKS (100,000) working tasks of one tenant in its
// PostgreSQL, written straight to the table, each due in ten minutes.
// Run it with -benchtime=1x: each figure is one measured window of 10 s.
func BenchmarkOpenTasksIdle(b *testing.B) {
	n := 100_000
	if s := os.Getenv("BENCH_OPEN_TASKS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("BENCH_OPEN_TASKS: %v", err)
		}
	}
	url := platformtest.PostgresSchemaURL(b)
	hook := acceptHook(b)
	p := platformtest.Start(b, url)
	p.MustAdmin(b, 201, "POST", "/api/v1/tenants", obj{"slug": "acme", "displayName": "Acme",
		"settings": obj{"auth": obj{"public": true}, "maxLiveTasks": 1_000_000, "maxLiveTasksPerPrincipal": 1_000_000}})
	p.Tool(b, "acme", taskTool("export", hook.URL, "may"))
	tenantID := platformtest.SQL(b, url).Strings(b, "SELECT id FROM tenants WHERE slug = 'acme'")[0]
	measure := func() (heapMB, cpuMsPerS float64, goroutines int) {
		time.Sleep(2 * time.Second) // past the first refresh and sweep
		cpu, start := platformtest.CPUTime(), time.Now()
		time.Sleep(10 * time.Second)
		cpuMsPerS = float64((platformtest.CPUTime() - cpu).Microseconds()) / 1000 / time.Since(start).Seconds()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapInuse) / (1 << 20), cpuMsPerS, runtime.NumGoroutine()
	}
	for i := 0; i < b.N; i++ {
		heap0, cpu0, g0 := measure()
		db := platformtest.SQL(b, url)
		db.Exec(b, `DELETE FROM tasks`)
		db.Exec(b, `INSERT INTO tasks (id, tenant_id, tenant_slug, flow_id, tool, era, status, secret, ttl_ms, poll_interval_ms, deadline_ms,
			created_at, updated_at, expires_at, due_at)
			SELECT 'tk_bench' || g, $1, 'acme', 'fl_bench' || g, 'export', '2026-07-28', 'working', 'x', 3600000, 2000, 600000,
			now(), now(), now() + interval '1 hour', now() + interval '10 minutes' FROM generate_series(1, $2) g`, tenantID, n)
		heap1, cpu1, g1 := measure()
		b.ReportMetric(heap0, "heap-MB-0-tasks")
		b.ReportMetric(heap1, "heap-MB-open-tasks")
		b.ReportMetric(cpu0, "idle-cpu-ms/s-0-tasks")
		b.ReportMetric(cpu1, "idle-cpu-ms/s-open-tasks")
		b.ReportMetric(float64(g0), "goroutines-0-tasks")
		b.ReportMetric(float64(g1), "goroutines-open-tasks")
		// Served all the same: a task created among them is read at once.
		client := &http.Client{}
		res, err := rpc(client, p.URL+"/t/acme/mcp", "tools/call", "export",
			[]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"export","arguments":{},`+taskMeta+`}}`))
		if err != nil || res["resultType"] != "task" {
			b.Fatalf("a task among %d: %v %v", n, res, err)
		}
	}
}
