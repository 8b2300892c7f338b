package infra

import (
	"fmt"
	"strings"
)

// ID names the place a cluster lives: a kind and its parts, written
// kind/part/part as in a handle's infra field:
//
//	local                       Kind=local
//	ssh/<pool>                  Kind=ssh   Parts=[pool]
//	k8s/<context>               Kind=k8s   Parts=[context]
//	slurm/<cluster>/<partition> Kind=slurm Parts=[cluster, partition]
//	aws/<region>/<zone>         Kind=aws   Parts=[region, zone]
//
// A part may be empty ("aws//us-east-1a" is not written: a zone without a
// region keeps the region part empty only in memory).
type ID struct {
	Kind  string
	Parts []string
}

// ParseID reads kind/part/part. The kind is lower-cased; empty parts at
// the end are dropped.
func ParseID(s string) (ID, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return ID{}, fmt.Errorf("empty infra ID; want kind[/part...], e.g. local or ssh/<pool>")
	}
	fields := strings.Split(s, "/")
	id := ID{Kind: strings.ToLower(fields[0])}
	if id.Kind == "" {
		return ID{}, fmt.Errorf("infra ID %q has no kind before its first '/'", s)
	}
	id.Parts = fields[1:]
	for len(id.Parts) > 0 && id.Parts[len(id.Parts)-1] == "" {
		id.Parts = id.Parts[:len(id.Parts)-1]
	}
	if len(id.Parts) == 0 {
		id.Parts = nil
	}
	return id, nil
}

// MustParseID is ParseID for IDs written in code.
func MustParseID(s string) ID {
	id, err := ParseID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// String writes the ID back in the form ParseID reads.
func (id ID) String() string {
	parts := append([]string{id.Kind}, id.Parts...)
	for len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return strings.Join(parts, "/")
}

// Part is the i-th part, or "" when absent.
func (id ID) Part(i int) string {
	if i < len(id.Parts) {
		return id.Parts[i]
	}
	return ""
}
