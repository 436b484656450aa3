package pipeline

import (
	"reflect"
	"testing"
)

// TestStagesHoldNoHost: a stage is a value holding what it needs of the
// Host, never the Host (issue 21, end state 5). Every type pipeline()
// builds a stage from, and the parts they hold (the middleware stage's
// approve layer and rewrite check, the human wait), is walked field by
// field, through pointers, slices and maps: none may reach a Host. A
// function field (a getter such as stateHolder.get) is not looked into; what it
// is given as is read in pipeline().
func TestStagesHoldNoHost(t *testing.T) {
	host := reflect.TypeOf(Host{})
	for _, v := range []any{
		admitStage{}, policyStage{}, auditStages{}, approvalStages{}, secretStages{},
		authorizeStage{}, sessionStages{}, coolDownStage{}, budgetStage{},
		middlewareStage{}, approveLayer{}, rewriteCheck{}, humanWait{},
	} {
		if path, ok := reaches(reflect.TypeOf(v), host, map[reflect.Type]bool{}); ok {
			t.Errorf("%T holds the Host: %s", v, path)
		}
	}
}

// reaches reports whether type t holds a want, and by which fields.
func reaches(t, want reflect.Type, seen map[reflect.Type]bool) (string, bool) {
	if t == want {
		return t.String(), true
	}
	if seen[t] {
		return "", false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
		return reaches(t.Elem(), want, seen)
	case reflect.Map:
		if p, ok := reaches(t.Key(), want, seen); ok {
			return p, true
		}
		return reaches(t.Elem(), want, seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if p, ok := reaches(f.Type, want, seen); ok {
				return t.Name() + "." + f.Name + " → " + p, true
			}
		}
	}
	return "", false
}
