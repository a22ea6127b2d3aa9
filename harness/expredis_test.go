package harness

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
)

// TestRedisExperimentSmall runs the redis experiment's small size with
// in-process psp servers (and redis-server when installed): every server
// answers or sheds every request of every mix (none is lost; on a busy
// machine some answers come late), and the
// tables have a row for each.
func TestRedisExperimentSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	servers := 2
	if _, err := exec.LookPath(RedisServerBinary); err != nil {
		testenv.Skip(t, "%s is not installed: the experiment would run psp alone (apt-get install redis-server)", RedisServerBinary)
	} else {
		servers++
	}
	e, err := LookupExperiment("redis")
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	res, err := e.Run(context.Background(), ExperimentOptions{Size: SizeSmall, Out: t.TempDir(), Launcher: InProcess{}, Duration: time.Second, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var out strings.Builder
	if err := WriteExperimentTables(&out, res); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if len(res.Tables) != 2 {
		t.Fatalf("%d tables", len(res.Tables))
	}
	tails, ratios := res.Tables[0], res.Tables[1]
	if len(tails.Rows) != 2*servers {
		t.Fatalf("%d rows, want 2 mixes x %d servers:\n%v", len(tails.Rows), servers, tails.Rows)
	}
	for _, r := range tails.Rows {
		sent, answered, shed, late, lost := atoi(t, r[3]), atoi(t, r[4]), atoi(t, r[5]), atoi(t, r[6]), atoi(t, r[7])
		if sent == 0 || lost != 0 || sent != answered+shed+late {
			t.Errorf("%s, %s: sent %d, answered %d, shed %d, late %d, lost %d", r[0], r[1], sent, answered, shed, late, lost)
		}
		if r[9] == "-" || (r[0] != "GET only" && r[12] == "-") {
			t.Errorf("%s, %s: no latency: %v", r[0], r[1], r)
		}
	}
	// The SCAN mix's ratios, for each psp server, against redis-server.
	if len(ratios.Rows) != 2 {
		t.Fatalf("ratio rows %v", ratios.Rows)
	}
	for _, r := range ratios.Rows {
		if r[3] == "-" || r[5] == "-" || r[7] == "-" {
			t.Errorf("ratios %v", r)
		}
	}
	if !strings.Contains(res.Measured, "SCAN") {
		t.Errorf("measured: %s", res.Measured)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
