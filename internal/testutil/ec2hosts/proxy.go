package ec2hosts

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/testutil/mototest"
)

// proxy fronts moto and refuses RunInstances in the failing zones the way
// EC2 does when a zone is out of capacity: HTTP 500 (EC2 counts it among
// its server errors) with the Query API's error document, code
// InsufficientInstanceCapacity. Everything else passes untouched.
type proxy struct {
	endpoint   string
	srv        *http.Server
	rp         *httputil.ReverseProxy
	moto       *mototest.Server
	cfg        aws.Config // to moto itself
	subnetZone sync.Map   // subnet id -> zone
	refused    atomic.Int64
	// lose is how many more RunInstances answers to drop after moto has
	// made the instances (the connection closes unanswered), as a network
	// can; lost counts those dropped.
	lose, lost atomic.Int64
	// settle runs after moto has stopped or terminated instances and
	// before the caller hears so.
	settle func()

	mu      sync.Mutex
	failing map[string]bool
}

func newProxy(host string, moto *mototest.Server, t testing.TB) (*proxy, error) {
	target, err := url.Parse(moto.Endpoint)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	p := &proxy{endpoint: "http://" + l.Addr().String(), rp: httputil.NewSingleHostReverseProxy(target), moto: moto,
		failing: map[string]bool{}}
	p.cfg = moto.Config(t, "")
	p.srv = &http.Server{Handler: p}
	go p.srv.Serve(l)
	return p, nil
}

func (p *proxy) close() { p.srv.Close() }

func (p *proxy) setFailing(zones []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failing = map[string]bool{}
	for _, z := range zones {
		p.failing[z] = true
	}
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The same bytes go on: the signature covers them.
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		switch form.Get("Action") {
		case "RunInstances":
			if zone := p.zoneOf(r.Context(), form, regionOf(r)); zone != "" && p.isFailing(zone) {
				p.refused.Add(1)
				p.refuse(w, form.Get("InstanceType"), zone)
				return
			}
			if p.lose.Add(-1) >= 0 {
				rec := httptest.NewRecorder()
				p.rp.ServeHTTP(rec, r)
				if hj, ok := w.(http.Hijacker); ok {
					if conn, _, err := hj.Hijack(); err == nil {
						p.lost.Add(1)
						conn.Close()
						return
					}
				}
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
				return
			}
			p.lose.Add(1) // back to 0: none to lose
		case "StopInstances", "TerminateInstances":
			if p.settle != nil {
				rec := httptest.NewRecorder()
				p.rp.ServeHTTP(rec, r)
				if rec.Code == http.StatusOK {
					p.settle()
				}
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
				return
			}
		}
	}
	p.rp.ServeHTTP(w, r)
}

func (p *proxy) isFailing(zone string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failing[zone]
}

var credScope = regexp.MustCompile(`Credential=[^/]+/\d{8}/([a-z0-9-]+)/`)

// regionOf is the region a request was signed for (SigV4 scope).
func regionOf(r *http.Request) string {
	if m := credScope.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return m[1]
	}
	return mototest.Region
}

// zoneOf is the zone a RunInstances asks for: Placement, else its subnet's.
func (p *proxy) zoneOf(ctx context.Context, form url.Values, region string) string {
	if z := form.Get("Placement.AvailabilityZone"); z != "" {
		return z
	}
	subnet := form.Get("SubnetId")
	if subnet == "" {
		for k, v := range form {
			if strings.HasPrefix(k, "NetworkInterface.") && strings.HasSuffix(k, ".SubnetId") && len(v) > 0 {
				subnet = v[0]
				break
			}
		}
	}
	if subnet == "" {
		return ""
	}
	if z, ok := p.subnetZone.Load(subnet); ok {
		return z.(string)
	}
	out, err := awsx.EC2(p.cfg, region).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnet}})
	if err != nil || len(out.Subnets) == 0 {
		return "" // moto answers the launch itself
	}
	z := aws.ToString(out.Subnets[0].AvailabilityZone)
	p.subnetZone.Store(subnet, z)
	return z
}

func (p *proxy) refuse(w http.ResponseWriter, instanceType, zone string) {
	if instanceType == "" {
		instanceType = "m1.small" // EC2's default type
	}
	p.mu.Lock()
	var others []string
	region := regionOfZone(zone)
	for _, z := range []string{"a", "b", "c", "d", "e", "f"} {
		if !p.failing[region+z] {
			others = append(others, region+z)
		}
	}
	p.mu.Unlock()
	sort.Strings(others)
	msg := fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). "+
		"Our system will be working on provisioning additional capacity. You can currently get %s capacity by not "+
		"specifying an Availability Zone in your request or choosing %s.", instanceType, zone, instanceType, strings.Join(others, ", "))
	id := make([]byte, 16)
	rand.Read(id)
	rid := hex.EncodeToString(id)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>InsufficientInstanceCapacity</Code><Message>%s</Message></Error></Errors><RequestID>%s-%s-%s-%s-%s</RequestID></Response>`,
		html.EscapeString(msg), rid[:8], rid[8:12], rid[12:16], rid[16:20], rid[20:])
}
