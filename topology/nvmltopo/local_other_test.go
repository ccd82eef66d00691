//go:build !(linux && cgo && nvml)

package nvmltopo

import (
	"errors"
	"testing"
)

func TestLocalWithoutCgoIsUnavailable(t *testing.T) {
	m, err := Local()
	if m != nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Local() = %v, %v; want nil, ErrUnavailable", m, err)
	}
}
