package tests

import (
	"os"
	"strings"
	"testing"

	"github.com/persephone-go/psp/internal/testenv"
)

// TestRedisRQ: RQ (Debian's python3-rq), a job queue nobody here wrote,
// runs jobs through psp serve --app redis: enqueued on two queues with
// MULTI/EXEC pipelines, taken by a worker that subscribes to its control
// channel and finds itself with CLIENT LIST, their results stored in and
// read back from streams, a failing job's error among them.
func TestRedisRQ(t *testing.T) {
	_, addr := startRedisServer(t)
	script, err := os.ReadFile("testdata/rq_jobs.py")
	if err != nil {
		t.Fatal(err)
	}
	out, err := testenv.DebianPython(t, "python3-rq", "rq", script, addr)
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("RQ against psp: %v\n%s", err, out)
	}
}
