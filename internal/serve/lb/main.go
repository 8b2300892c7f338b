package lb

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// drainTimeout bounds how long a shutdown waits for requests in flight.
const drainTimeout = 5 * time.Second

// Main is `sky-lb serve-lb`: it serves until POST /shutdown or SIGTERM, then
// drains and returns 0. It returns 2 for bad flags and for a listen port
// already taken (the controller tries again later: a service keeps its
// port), 1 for any other failure to start.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sky-lb serve-lb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	service := fs.String("service", "", "name of the service (for the log)")
	listen := fs.String("listen", "", "HOST:PORT to serve the service's traffic on")
	control := fs.String("control", "", "path of the control socket")
	policy := fs.String("policy", LeastLoad, "load balancing policy: round_robin, least_load or instance_aware_least_load")
	streamTimeout := fs.Float64("stream-timeout", 120, "seconds a proxied response may take (0: unbounded)")
	holdTimeout := fs.Float64("hold-timeout", 120, "seconds a held request waits for a ready replica")
	tlsCert := fs.String("tls-cert", "", "certificate file: serve HTTPS")
	tlsKey := fs.String("tls-key", "", "private key file of --tls-cert")
	watch := fs.String("watch", "", "directory whose removal ends the load balancer (its service's state)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "sky-lb serve-lb: %s\n", msg)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case *service == "":
		return usage("--service is required")
	case *listen == "":
		return usage("--listen HOST:PORT is required")
	case *control == "":
		return usage("--control SOCKET is required")
	case *streamTimeout < 0:
		return usage("--stream-timeout must be >= 0")
	case *holdTimeout < 0:
		return usage("--hold-timeout must be >= 0")
	case (*tlsCert == "") != (*tlsKey == ""):
		return usage("--tls-cert and --tls-key go together")
	}
	b, err := New(Options{
		Policy:        *policy,
		StreamTimeout: seconds(*streamTimeout),
		HoldTimeout:   seconds(*holdTimeout),
		Log:           stderr,
	})
	if err != nil {
		return usage(err.Error())
	}
	var tlsConf *tls.Config
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			fmt.Fprintf(stderr, "sky-lb serve-lb: TLS certificate %s / key %s: %v\n", *tlsCert, *tlsKey, err)
			return 1
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Fprintf(stderr, "sky-lb serve-lb: %s is in use by another process: stop it, or wait for it to free the port\n", *listen)
			return 2
		}
		fmt.Fprintf(stderr, "sky-lb serve-lb: listen %s: %v\n", *listen, err)
		return 1
	}
	ctlLn, err := listenControl(*control)
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "sky-lb serve-lb: %v\n", err)
		return 1
	}
	if mine, err := os.Stat(*control); err == nil {
		defer func() {
			// Only this load balancer's socket: a successor's stays.
			if cur, err := os.Stat(*control); err == nil && sameSocket(mine, cur) {
				os.Remove(*control)
			}
		}()
	}

	cs := &controlServer{b: b, listen: ln.Addr().String(), shutdown: make(chan struct{})}
	srv := &http.Server{
		Handler:           b,
		ReadHeaderTimeout: time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          b.log.std(),
		TLSConfig:         tlsConf,
	}
	ctl := &http.Server{Handler: cs.handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 2)
	go func() {
		if tlsConf != nil {
			served <- srv.ServeTLS(ln, "", "")
		} else {
			served <- srv.Serve(ln)
		}
	}()
	go func() { served <- ctl.Serve(ctlLn) }()
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	b.log.printf("load balancer of service %s on %s://%s (policy %s, pid %d)", *service, scheme, ln.Addr(), b.policy, os.Getpid())

	orphaned := make(chan string, 1)
	go watchState(*control, *watch, orphaned)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	code := 0
	select {
	case <-cs.shutdown:
		b.log.printf("shutdown asked on the control socket: draining")
	case s := <-sig:
		b.log.printf("%s: draining", s)
	case why := <-orphaned:
		b.log.printf("%s: nobody can reach this load balancer any more; draining", why)
	case err := <-served:
		b.log.printf("serving stopped: %v", err)
		code = 1
	}
	b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		b.log.printf("drain: %v; closing the remaining connections", err)
		srv.Close()
	}
	b.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if err := ctl.Shutdown(ctx2); err != nil {
		ctl.Close()
	}
	b.log.printf("load balancer of service %s stopped", *service)
	return code
}

// watchState reports once the load balancer is orphaned: its control
// socket was removed or replaced (another load balancer of the service
// took over), or the directory of its service's state is gone (the
// service's HOME was deleted under it, as a test's temporary one is). A
// load balancer outlives the API server that started it on purpose, so
// traffic flows while the server restarts; this is what ends it when no
// server will ever come back for it.
func watchState(sock, dir string, orphaned chan<- string) {
	first, err := os.Stat(sock)
	if err != nil {
		return
	}
	for range time.Tick(2 * time.Second) {
		cur, err := os.Stat(sock)
		switch {
		case err != nil:
			orphaned <- "the control socket " + sock + " is gone"
			return
		case !sameSocket(first, cur):
			orphaned <- "the control socket " + sock + " was replaced"
			return
		}
		if dir != "" {
			if _, err := os.Stat(dir); err != nil {
				orphaned <- "the service directory " + dir + " is gone"
				return
			}
		}
	}
}

// sameSocket says whether two looks at a socket path saw the same
// socket: the inode of a removed one is soon reused, its time is not.
func sameSocket(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime())
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
