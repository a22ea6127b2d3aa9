package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/server"
)

// Status returns the server's current status (GET /status).
func (c *Client) Status(ctx context.Context) (*server.Status, error) {
	body, err := c.statusBody(ctx)
	if err != nil {
		return nil, err
	}
	return c.decodeStatus(body)
}

// StatusJSON returns the server's GET /status document as sent, once it
// has checked that it is one (see statusDocument).
func (c *Client) StatusJSON(ctx context.Context) ([]byte, error) {
	body, err := c.statusBody(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.decodeStatus(body); err != nil {
		return nil, err
	}
	return body, nil
}

// statusBody reads the server's GET /status answer.
func (c *Client) statusBody(ctx context.Context) ([]byte, error) {
	var body []byte
	if err := c.call(ctx, http.MethodGet, "/status", "", nil, "", http.StatusOK, nil, &body); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	return body, nil
}

// statusDocument is a psp /status document with its "policy" member
// decoded apart: every psp server reports one, and a JSON answer without it
// comes from something else listening on the admin address.
type statusDocument struct {
	server.Status
	Policy *string `json:"policy"` // shadows Status.Policy
}

// decodeStatus decodes body, refusing an answer that is not a psp status
// document.
func (c *Client) decodeStatus(body []byte) (*server.Status, error) {
	var doc statusDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("status: decode: %w (is %s a psp admin endpoint?)", err, c.base)
	}
	if doc.Policy == nil {
		return nil, fmt.Errorf(`status: decode: no "policy" member (is %s a psp admin endpoint?)`, c.base)
	}
	doc.Status.Policy = *doc.Policy
	return &doc.Status, nil
}

// Metrics returns the server's GET /metrics (Prometheus text format).
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	var body []byte
	if err := c.call(ctx, http.MethodGet, "/metrics", "", nil, "", http.StatusOK, nil, &body); err != nil {
		if errors.Is(err, errAnswerTooLarge) {
			return nil, fmt.Errorf("metrics: %w (a server of many types: a tenant's own token reads its series only)", err)
		}
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return body, nil
}

// Reservation describes a status's reservation compactly, e.g.
// "SHORT on 0; LONG on 1-12 + spillway", or "" when there is none (other
// policies, or DARC still profiling).
func Reservation(st *server.Status) string {
	var b strings.Builder
	for i, g := range st.Groups {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.Join(g.Types, ","))
		b.WriteString(" on ")
		if len(g.Reserved) == 0 {
			b.WriteString("none")
		} else {
			b.WriteString(affinity.FormatList(g.Reserved))
		}
		if g.Spillway {
			b.WriteString(" + spillway")
		}
	}
	return b.String()
}
