package lb

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Client speaks to one load balancer's control socket.
type Client struct {
	hc *http.Client
}

// Dial returns a client of the control socket at sock (no connection is
// made until a call).
func Dial(sock string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConns: 1, IdleConnTimeout: 30 * time.Second,
	}
	// Each call's context bounds it; the client's own limit only stops a
	// call made without one from waiting for ever.
	return &Client{hc: &http.Client{Transport: tr, Timeout: time.Minute}}
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://lb"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("load balancer %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(msg))
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// SetReplicas pushes the ready set.
func (c *Client) SetReplicas(ctx context.Context, set ReplicaSet) error {
	return c.do(ctx, http.MethodPut, "/replicas", set, nil)
}

// State reads the load balancer's state.
func (c *Client) State(ctx context.Context) (State, error) {
	var st State
	err := c.do(ctx, http.MethodGet, "/state", nil, &st)
	return st, err
}

// Shutdown asks the load balancer to drain and exit.
func (c *Client) Shutdown(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/shutdown", nil, nil)
}

// Close drops the client's idle connection.
func (c *Client) Close() { c.hc.CloseIdleConnections() }
