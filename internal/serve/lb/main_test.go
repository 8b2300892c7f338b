package lb

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runningLB is Main running in the test process.
type runningLB struct {
	sock   string
	client *Client
	state  State
	done   chan int
	stderr *syncBuf
}

func startMain(t *testing.T, extra ...string) *runningLB {
	t.Helper()
	dir, err := os.MkdirTemp("", "lb") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := &runningLB{sock: filepath.Join(dir, "lb.sock"), done: make(chan int, 1), stderr: &syncBuf{}}
	args := append([]string{"--service", "svc", "--listen", "127.0.0.1:0", "--control", r.sock}, extra...)
	go func() { r.done <- Main(args, r.stderr) }()
	r.client = Dial(r.sock)
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := r.client.State(ctxTimeout(t, time.Second))
		if err == nil {
			r.state = st
			break
		}
		select {
		case code := <-r.done:
			t.Fatalf("Main returned %d: %s", code, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("control socket never answered: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() {
		_ = r.client.Shutdown(ctxTimeout(t, time.Second))
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
		}
	})
	return r
}

func TestControlSocketRoundTripAndShutdown(t *testing.T) {
	r := startMain(t, "--policy", "round_robin")
	if r.state.PID != os.Getpid() || !strings.HasPrefix(r.state.Listen, "127.0.0.1:") || r.state.Generation != 0 {
		t.Fatalf("state %+v", r.state)
	}
	fi, err := os.Stat(r.sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket mode %v (%v), want 0600", fi.Mode(), err)
	}
	ctx := ctxTimeout(t, 5*time.Second)
	slowDone := make(chan struct{})
	slow := replicaServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(500 * time.Millisecond)
		}
		fmt.Fprint(w, "ok")
	}))
	if err := r.client.SetReplicas(ctx, ReplicaSet{Generation: 7, Replicas: []Replica{{ID: 3, URL: slow.URL, Version: 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := r.client.SetReplicas(ctx, ReplicaSet{Replicas: []Replica{{ID: 1, URL: "no-scheme"}}}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("bad set: %v", err)
	}
	base := "http://" + r.state.Listen
	if code, body := get(t, http.DefaultClient, base+"/"); code != 200 || body != "ok" {
		t.Fatalf("%d %q", code, body)
	}
	st, err := r.client.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Generation != 7 || countRequests(st) != 1 || st.InFlight[3] != 0 || len(st.InFlight) != 1 {
		t.Fatalf("state %+v", st)
	}
	// Shutdown drains the request in flight.
	go func() {
		defer close(slowDone)
		code, body := get(t, http.DefaultClient, base+"/slow")
		if code != 200 || body != "ok" {
			t.Errorf("request during the drain: %d %q", code, body)
		}
	}()
	waitFor(t, "slow request in flight", func() bool {
		st, err := r.client.State(ctx)
		return err == nil && st.InFlight[3] == 1
	})
	if err := r.client.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-r.done:
		if code != 0 {
			t.Fatalf("Main returned %d: %s", code, r.stderr)
		}
	case <-time.After(7 * time.Second):
		t.Fatal("Main did not return after /shutdown")
	}
	<-slowDone
	if _, err := os.Stat(r.sock); !os.IsNotExist(err) {
		t.Errorf("control socket left behind: %v", err)
	}
	lg := r.stderr.String()
	for _, want := range []string{"load balancer of service svc on http://" + r.state.Listen, "ready replicas (generation 7, hold false): 3=" + slow.URL, "stopped"} {
		if !strings.Contains(lg, want) {
			t.Errorf("log lacks %q:\n%s", want, lg)
		}
	}
}

func TestMainRefusesBadFlagsAndATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	sock := filepath.Join(t.TempDir(), "s")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--listen", taken.Addr().String(), "--control", sock}, 2, "--service is required"},
		{[]string{"--service", "s", "--listen", taken.Addr().String(), "--control", sock}, 2, taken.Addr().String() + " is in use by another process"},
		{[]string{"--service", "s", "--listen", "127.0.0.1:0", "--control", sock, "--policy", "random"}, 2, `unknown load balancing policy "random"`},
		{[]string{"--service", "s", "--listen", "127.0.0.1:0", "--control", sock, "--tls-cert", "c.pem"}, 2, "--tls-cert and --tls-key go together"},
		{[]string{"--service", "s", "--listen", "127.0.0.1:0", "--control", sock, "--tls-cert", "/nonexistent/c", "--tls-key", "/nonexistent/k"}, 1, "TLS certificate /nonexistent/c"},
		{[]string{"--service", "s", "--listen", "127.0.0.1:0", "--control", sock, "--stream-timeout", "x"}, 2, "invalid value"},
	} {
		var stderr syncBuf
		if code := Main(tc.args, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
	// A control socket a live load balancer holds is not taken over.
	r := startMain(t)
	var stderr syncBuf
	if code := Main([]string{"--service", "svc", "--listen", "127.0.0.1:0", "--control", r.sock}, &stderr); code != 1 || !strings.Contains(stderr.String(), "in use by another load balancer") {
		t.Errorf("second load balancer on the socket: %d %q", code, stderr.String())
	}
}

func TestTLSListener(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	r := startMain(t, "--tls-cert", certFile, "--tls-key", keyFile)
	rep := replicaServer(t, named(1))
	if err := r.client.SetReplicas(ctxTimeout(t, 5*time.Second), ReplicaSet{Generation: 1, Replicas: []Replica{{ID: 1, URL: rep.URL}}}); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	code, body := get(t, c, "https://"+r.state.Listen+"/")
	if code != 200 || body != "replica 1" {
		t.Fatalf("%d %q", code, body)
	}
	// An HTTP/2 client (the TLS listener offers h2) goes through too.
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	res2, err := h2.Post("https://"+r.state.Listen+"/h2", "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(res2.Body)
	res2.Body.Close()
	if res2.ProtoMajor != 2 || res2.StatusCode != 200 || string(b2) != "replica 1" {
		t.Fatalf("HTTP/2: %s %d %q", res2.Proto, res2.StatusCode, b2)
	}
	// Plain HTTP on the TLS port is refused.
	res, err := http.Get("http://" + r.state.Listen + "/")
	if err == nil {
		defer res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP on the TLS port: %d", res.StatusCode)
		}
	}
	if !strings.Contains(r.stderr.String(), "on https://") {
		t.Errorf("log: %s", r.stderr)
	}
}

func selfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "lb test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// wsGUID is RFC 6455's handshake constant.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// wsEcho is a WebSocket server of small text frames that echoes them.
func wsEcho(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, "websocket only", http.StatusBadRequest)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", wsAccept(r.Header.Get("Sec-WebSocket-Key")))
	if brw.Flush() != nil {
		return
	}
	for {
		op, payload, err := wsRead(brw.Reader)
		if err != nil || op == 8 {
			return
		}
		if wsWrite(conn, payload, false) != nil {
			return
		}
	}
}

// wsRead reads one frame of fewer than 126 bytes, unmasking it.
func wsRead(r *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(h[1] & 0x7f)
	if n >= 126 {
		return 0, nil, fmt.Errorf("frame too long for this test")
	}
	var mask [4]byte
	masked := h[1]&0x80 != 0
	if masked {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return 0, nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	if masked {
		for i := range p {
			p[i] ^= mask[i%4]
		}
	}
	return h[0] & 0x0f, p, nil
}

// wsWrite writes one final text frame; clients mask theirs.
func wsWrite(w io.Writer, p []byte, mask bool) error {
	frame := []byte{0x81, byte(len(p))}
	body := append([]byte(nil), p...)
	if mask {
		frame[1] |= 0x80
		key := [4]byte{1, 2, 3, 4}
		frame = append(frame, key[:]...)
		for i := range body {
			body[i] ^= key[i%4]
		}
	}
	_, err := w.Write(append(frame, body...))
	return err
}

func TestWebSocketEchoThroughTheProxy(t *testing.T) {
	l := newTestLB(t, Options{StreamTimeout: 200 * time.Millisecond})
	l.push(t, false, replicaServer(t, http.HandlerFunc(wsEcho)).URL)
	conn, err := net.Dial("tcp", strings.TrimPrefix(l.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: lb\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", key)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		t.Fatalf("handshake: %s %v", res.Status, res.Header)
	}
	for i := 0; i < 3; i++ {
		msg := fmt.Sprintf("hello %d", i)
		if err := wsWrite(conn, []byte(msg), true); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		op, p, err := wsRead(br)
		if err != nil || op != 1 || string(p) != msg {
			t.Fatalf("echo %d: op %d %q %v", i, op, p, err)
		}
		// Longer than the stream timeout: it does not cut a WebSocket.
		time.Sleep(100 * time.Millisecond)
	}
	if st := l.State(); st.InFlight[1] != 1 {
		t.Errorf("in flight during the session %v, want 1", st.InFlight)
	}
	_, _ = conn.Write([]byte{0x88, 0x80, 0, 0, 0, 0}) // close
	conn.Close()
	l.settled(t)
}

// TestWatchStateOrphans: a load balancer whose service directory is
// removed, or whose control socket another one replaced, says so.
func TestWatchStateOrphans(t *testing.T) {
	for _, c := range []struct {
		name string
		act  func(sock, dir string)
		want string
	}{
		{"dir removed", func(sock, dir string) { os.RemoveAll(dir) }, "directory"},
		{"socket replaced", func(sock, dir string) {
			os.Remove(sock)
			os.WriteFile(sock, nil, 0o600)
		}, "replaced"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "svc")
			os.MkdirAll(dir, 0o700)
			sock := filepath.Join(root, "lb.sock")
			if err := os.WriteFile(sock, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			got := make(chan string, 1)
			go watchState(sock, dir, got)
			time.Sleep(100 * time.Millisecond)
			c.act(sock, dir)
			select {
			case why := <-got:
				if !strings.Contains(why, c.want) {
					t.Fatalf("reason %q, want it to say %q", why, c.want)
				}
			case <-time.After(6 * time.Second):
				t.Fatal("not orphaned within 6 s")
			}
		})
	}
}
