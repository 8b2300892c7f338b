// Package op is the contract between the API server and the operations
// it serves: an Op names its work and the worker pool it runs on, a
// Request is what the work sees of the API request, and an Error chooses
// the error type recorded in the request. The server (internal/server)
// runs Ops; the operations (internal/core, and the infrastructures' own)
// define them. Both import this package and neither imports the other.
//
// An operation is described once, by a Desc in internal/apiop (name,
// body and result types, schedule, auth rule), and served with
// Handle(desc, handler); clients submit the same Desc. Adding an
// operation is one descriptor, one handler and the command that calls
// it.
package op

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/skygo/skygo/internal/api"
)

// Schedule says which worker pool runs an operation.
type Schedule int

const (
	// Short is for quick reads and light actions (status, stop, cancel...).
	Short Schedule = iota
	// Long is for provisioning-type work (launch, exec, start...).
	Long
	// Follow is for requests that follow something for as long as a client
	// watches them (tailing a job's log). They get a pool of their own,
	// so however many clients follow logs, none of them holds a worker
	// that launch, exec, start or down are waiting for. The request record
	// says "short", as SkyPilot's does for its log requests.
	Follow
)

func (s Schedule) String() string {
	if s == Long {
		return "long"
	}
	return "short"
}

// Op is one operation the server offers. Name "launch" is served at
// POST /launch and recorded as request name "sky.launch"; "jobs.launch" is
// POST /jobs/launch and "sky.jobs.launch".
//
// Run must honour ctx: cancelling a request cancels ctx, and the request is
// only reported CANCELLED once Run returns. Child processes must be started
// with proc.Command (or exec.CommandContext plus a process-group kill), so
// that cancelling also kills everything they spawned.
//
// CancelWhenUnfollowed marks an operation whose only use is the output it
// feeds the client following it (a log tail): the server cancels such a
// request once the last client streaming or waiting on it goes away, or
// when no client comes to follow it at all, so a killed client never
// leaves it running. Operations that change the world (launch, down...)
// leave it false and keep running when their client leaves.
//
// Body and Result are values of the Go types of the POSTed body and of
// the request's return_value (zero values will do): the server describes
// its API from them (GET /api/openapi.json, docs/openapi.json), so the
// description is the code's and cannot drift from it. Every op sets
// both; an op whose return_value is always null says Null{}, one that
// takes no fields NoBody{}.
//
// Stream, when set, also serves the op's result as it is read, without a
// request record: POST <path>/stream answers one JSON value per line,
// each one passed to emit. It is for results too large to be one stored
// return value (the whole managed-jobs queue), so a listing never holds
// more than a page of them; the server routes only those it names in its
// fixed routes. The request it gets has no ID, log or files.
//
// AdminOnly, when set, names the command that sends an operation only an
// admin may run (Permit).
//
// Decode, when set, decodes a POSTed body into the op's body type (a
// pointer to a value of it): the server calls it as the request arrives,
// so that a body that is not one (a task's resources that are not
// valid, a field of the wrong type) is refused at once with a 400
// naming the field, and hands the value to Run as Request.Decoded, so
// the body is decoded once.
//
// Operations are made from their descriptors (internal/apiop) with Handle
// rather than written out field by field.
type Op struct {
	Name                 string
	Schedule             Schedule
	CancelWhenUnfollowed bool
	AdminOnly            string
	Body, Result         any
	Run                  func(ctx context.Context, r *Request) (any, error)
	Stream               func(ctx context.Context, r *Request, emit func(v any) error) error
	Decode               func(body []byte) (any, error)
}

// Null is the Result of an op whose return_value is always null.
type Null struct{}

// NoBody is the Body of an op that reads no field of its body ({}).
type NoBody struct{}

// Request is what an operation sees of the API request it serves.
type Request struct {
	ID   string
	Name string // "sky.<op>"
	User api.User
	Body json.RawMessage // the POSTed JSON object
	// Decoded is Body as the op's Decode made it, when the server
	// called it (nil otherwise).
	Decoded     any
	ClusterName string // body's cluster_name, if any
	// Log is the request's own log (request_logs/<id>.log); whatever the
	// op writes here is what `sky api logs <id>` and the CLI stream show.
	Log io.Writer
	// Files is a directory of this request's own (not yet created) where
	// an op leaves files for its client to fetch with GET /api/download:
	// what is too big for a result, which the request table keeps. The
	// server removes it an hour after it was made.
	Files string
}

// Decode unmarshals the request body into v.
func (r *Request) Decode(v any) error {
	if len(r.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		return &Error{Type: "ValueError", Message: fmt.Sprintf("request body of %s: %v", r.Name, err)}
	}
	return nil
}

// Error lets an operation choose the error type recorded in the request
// (e.g. "ClusterNotUpError"); other errors are recorded with type
// "SkyGoError".
type Error struct {
	Type    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// ErrorType is what the server's executor records as the error type.
func (e *Error) ErrorType() string { return e.Type }
