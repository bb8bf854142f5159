package memstore_test

import (
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/memstore"
	"github.com/membuf/membuf/cas/storagetest"
)

// TestConformance: the store the protocols' tests run on keeps the
// contract, every digest function apart.
func TestConformance(t *testing.T) {
	open := func(t *testing.T) cas.Storage { return memstore.New() }
	storagetest.Run(t, open)
	storagetest.RunFunctions(t, open)
}
