package server

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// lintMetrics checks an exposition with the Prometheus client library's
// linter (the rules promtool check metrics applies).
func lintMetrics(t *testing.T, body string) {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
