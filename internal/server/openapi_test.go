package server

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

type openAPI struct {
	Paths      map[string]map[string]yaml.MapSlice `yaml:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]struct {
				Enum []string `yaml:"enum"`
			} `yaml:"properties"`
		} `yaml:"schemas"`
	} `yaml:"components"`
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	b, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPI
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	return &doc
}

// TestOpenAPIMatchesRoutes: every path and method in api/openapi.yaml is
// routed by the server, and every route is documented.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	var documented, routed []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	for _, rt := range routeTable() {
		routed = append(routed, rt.method+" "+rt.path)
	}
	slices.Sort(documented)
	slices.Sort(routed)
	if !slices.Equal(documented, routed) {
		t.Errorf("openapi documents %v\nserver routes %v", documented, routed)
	}
	// And the router really answers each of them (not 404/405).
	ts := newTS(t, nil, nil)
	for _, rt := range routeTable() {
		path := strings.ReplaceAll(rt.path, "{name}", "x")
		r := ts.do(rt.method, path, "", "{}")
		if r.status == 404 && r.env.Error != nil && r.env.Error.Code == wire.CodeNotFound || r.status == 405 {
			t.Errorf("%s %s: %d %s", rt.method, path, r.status, r.raw)
		}
	}
}

// TestOpenAPIErrorCodes: the documented error codes are the Go code table,
// and every documented error status is one the table uses.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	codes := doc.Components.Schemas["Error"].Properties["code"].Enum
	slices.Sort(codes)
	want := slices.Sorted(maps.Keys(wire.HTTPStatus))
	if !slices.Equal(codes, want) {
		t.Errorf("openapi codes %v, Go codes %v", codes, want)
	}
	statuses := map[string]bool{}
	for _, s := range wire.HTTPStatus {
		statuses[strconv.Itoa(s)] = true
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for _, item := range op {
				if item.Key != "responses" {
					continue
				}
				for _, resp := range item.Value.(yaml.MapSlice) {
					code := resp.Key.(string)
					if code[0] >= '4' && !statuses[code] && path != "/healthz" {
						t.Errorf("%s %s documents status %s, which no error code uses", method, path, code)
					}
				}
			}
		}
	}
}

// TestOpenAPISchemasMatchGo: each documented schema has exactly the JSON
// fields of its Go type.
func TestOpenAPISchemasMatchGo(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, v := range map[string]any{
		"AcquireRequest": wire.AcquireRequest{}, "RenewRequest": wire.RenewRequest{},
		"ReleaseRequest": wire.ReleaseRequest{}, "ForceReleaseRequest": wire.ForceReleaseRequest{},
		"Lease": wire.Lease{}, "Error": wire.Error{}, "Envelope": wire.Envelope{},
		"Holder": sema.Holder{}, "WaiterInfo": sema.WaiterInfo{}, "Status": sema.Status{},
		"ListResponse": wire.ListResponse{}, "ForceReleaseResponse": wire.ForceReleaseResponse{},
		"Guarantees": sema.Guarantees{},
	} {
		var goFields []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag := strings.Split(rt.Field(i).Tag.Get("json"), ",")[0]
			if tag == "" {
				tag = rt.Field(i).Name
			}
			goFields = append(goFields, tag)
		}
		docFields := slices.Sorted(maps.Keys(doc.Components.Schemas[name].Properties))
		slices.Sort(goFields)
		if !slices.Equal(goFields, docFields) {
			t.Errorf("schema %s: openapi %v, Go %v", name, docFields, goFields)
		}
	}
}
