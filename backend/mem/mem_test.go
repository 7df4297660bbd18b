package mem_test

import (
	"testing"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
	"github.com/sema-dev/sema/backendtest"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Config{
		New: func(t *testing.T) sema.Backend { return mem.New() },
	})
}
