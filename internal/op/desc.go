package op

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/api"
)

// Desc describes one operation of the API: everything about it that its
// server and its clients must agree on. B is the Go type of its body and
// R of its result (return_value). The descriptors themselves live
// together in internal/apiop, which the server's operations, the command
// line and the SDK all import; the server serves a Desc with Handle, a
// client submits one by its Name and decodes its result into an R.
type Desc[B, R any] struct {
	// Name "launch" is served at POST /launch and recorded as request name
	// "sky.launch"; "jobs.launch" is POST /jobs/launch.
	Name     string
	Schedule Schedule
	// CancelWhenUnfollowed: see Op.
	CancelWhenUnfollowed bool
	// AdminOnly, when set, restricts the operation to admins; it names
	// the command that sends it ("`sky local down`"), for the refusal.
	AdminOnly string
}

// RequestName is what the request table records d's requests as:
// "sky.launch".
func (d Desc[B, R]) RequestName() string { return "sky." + d.Name }

// Path is where d is served: POST /launch, POST /jobs/launch.
func (d Desc[B, R]) Path() string { return Path(d.Name) }

// Path is where the operation named name (or request name "sky."+name)
// is served: "jobs.launch" at /jobs/launch.
func Path(name string) string {
	return "/" + strings.ReplaceAll(strings.TrimPrefix(name, "sky."), ".", "/")
}

// Handle is the one adapter between a descriptor and the function that
// does its work: the Op it returns decodes the body into a B (a body
// that is not one fails with a ValueError naming the request, as
// Request.Decode does), calls h and hands its R on as the result. Name,
// schedule, auth rule and the Body and Result types the API description
// is made from all come from d.
func Handle[B, R any](d Desc[B, R], h func(ctx context.Context, r *Request, b B) (R, error)) Op {
	var body B
	var result R
	return Op{
		Name: d.Name, Schedule: d.Schedule, CancelWhenUnfollowed: d.CancelWhenUnfollowed, AdminOnly: d.AdminOnly,
		Body: body, Result: result,
		Decode: func(raw []byte) (any, error) {
			b := new(B)
			if err := json.Unmarshal(raw, b); err != nil {
				return nil, err
			}
			return b, nil
		},
		Run: func(ctx context.Context, r *Request) (any, error) {
			b, err := decodeBody[B](r)
			if err != nil {
				return nil, err
			}
			res, err := h(ctx, r, b)
			if err != nil {
				return nil, err
			}
			if isNull(res) {
				return nil, nil
			}
			return res, nil
		},
	}
}

// HandleStream is Handle for an operation that is also served as a
// stream (Op.Stream): s gets the body decoded as Handle decodes it and
// emits the result's records, each a T, one at a time.
func HandleStream[B, R, T any](d Desc[B, R], h func(ctx context.Context, r *Request, b B) (R, error),
	s func(ctx context.Context, r *Request, b B, emit func(T) error) error) Op {
	o := Handle(d, h)
	o.Stream = func(ctx context.Context, r *Request, emit func(any) error) error {
		var b B
		if err := r.Decode(&b); err != nil {
			return err
		}
		return s(ctx, r, b, func(v T) error { return emit(v) })
	}
	return o
}

// decodeBody is r's body as a B: the value the server decoded as the
// request arrived, else decoded now.
func decodeBody[B any](r *Request) (B, error) {
	if v, ok := r.Decoded.(*B); ok {
		return *v, nil
	}
	var b B
	err := r.Decode(&b)
	return b, err
}

// isNull says whether a result is recorded as JSON null: Null, whose
// value is never anything else.
func isNull(v any) bool {
	_, ok := v.(Null)
	return ok
}

// Permit refuses r when o is for admins only and r's user is not one.
// The server asks it before running o, so the refusal is the same for
// every operation that carries the rule.
func (o Op) Permit(r *Request) error {
	if o.AdminOnly == "" || r.User.Role == api.RoleAdmin {
		return nil
	}
	return &Error{Type: "PermissionError", Message: fmt.Sprintf(
		"%s changes infrastructure that every user of this API server shares (and the clusters on it): only an admin may run it.", o.AdminOnly)}
}
